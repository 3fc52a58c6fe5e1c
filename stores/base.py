"""The key-value store API every engine and layer implements (Samza's ``KeyValueStore``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Generic, NamedTuple, Protocol, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Entry(NamedTuple, Generic[K, V]):
    """One key and its value, as iterators yield them."""

    key: K
    value: V


class KeyValueIterator(Iterator[Entry[K, V]]):
    """An iterator over entries that holds engine resources until closed.

    Use it as a context manager (``with store.range(a, b) as it: ...``); it is also closed
    when exhausted.
    """

    def __init__(self, entries: Iterator[Entry[K, V]], on_close: object = None) -> None:
        self._entries = entries
        self._on_close = on_close
        self._closed = False

    def __iter__(self) -> KeyValueIterator[K, V]:
        return self

    @property
    def entries(self) -> Iterator[Entry[K, V]]:
        """The entries this wraps, for a layer that wraps them again in an iterator that closes this one."""
        return self._entries

    def __next__(self) -> Entry[K, V]:
        if self._closed:
            raise StopIteration
        try:
            return next(self._entries)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        """Release the engine resources; further iteration yields nothing."""
        if not self._closed:
            self._closed = True
            if callable(self._on_close):
                self._on_close()

    def __enter__(self) -> KeyValueIterator[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KeyValueStore(ABC, Generic[K, V]):
    """A sorted key-value store of one task.

    Keys are ordered by their serialised bytes (as RocksDB orders them). ``put(k, None)`` is
    a delete, as in Samza. Writes become durable (and reach the changelog) at the latest at
    the next commit.
    """

    @abstractmethod
    def get(self, key: K) -> V | None:
        """The value of ``key``, or ``None`` when absent."""

    def get_all(self, keys: Iterable[K]) -> dict[K, V]:
        """The values of those ``keys`` that are present."""
        found: dict[K, V] = {}
        for key in keys:
            value = self.get(key)
            if value is not None:
                found[key] = value
        return found

    @abstractmethod
    def put(self, key: K, value: V | None) -> None:
        """Set ``key`` to ``value``; ``None`` deletes."""

    @abstractmethod
    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Set many keys at once: atomic on the engine (one RocksDB WriteBatch)."""

    def delete(self, key: K) -> None:
        """Remove ``key`` (no error when absent)."""
        self.put(key, None)

    def delete_all(self, keys: Iterable[K]) -> None:
        """Remove every key of ``keys``, atomically on the engine."""
        self.put_all((key, None) for key in keys)

    def delete_scanned(self, keys: list[K], from_key: K, to_key: K) -> None:
        """Remove ``keys``, which are every entry with ``from_key <= key < to_key``.

        For a caller that has just read that range (``range(from_key, to_key)``) and written
        nothing since: a purge of closed windows. The result is :meth:`delete_all` of ``keys``
        (each layer sees each key deleted: the cache forgets it, the changelog gets its
        tombstone), but an engine may remove the range as one (RocksDB: one range tombstone
        instead of one per key, which its flushes, compactions and later scans pay for). This
        default is ``delete_all(keys)``: a layer passes the range down only when it overrides
        this method.
        """
        self.delete_all(keys)

    @abstractmethod
    def range(self, from_key: K, to_key: K) -> KeyValueIterator[K, V]:
        """Entries with ``from_key <= key < to_key`` in serialised-key order."""

    @abstractmethod
    def all(self) -> KeyValueIterator[K, V]:
        """Every entry, in serialised-key order."""

    @abstractmethod
    def flush(self) -> None:
        """Write everything buffered down to the engine (and the changelog producer)."""

    def close(self) -> None:  # noqa: B027 - optional for stores without resources
        """Release resources; the store is unusable afterwards."""


class ReadView(Protocol):
    """Read-only access to an engine's bytes, safe from another thread while its task writes.

    What the query service reads. Engines return one from ``read_view()``.

    Reads are committed-or-newer: they see what the engine holds now, which is at least the
    state of the last commit (the object cache above the engine is not seen).
    """

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None``."""

    def scan(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries with ``from_key <= key < to_key`` (``None``: unbounded), in key byte order.

        Complete or an error, never silently partial.
        """

    def close(self) -> None:
        """Release what the view holds (a view of a live engine holds nothing)."""


class RawStore(KeyValueStore[bytes, bytes]):
    """The engine at the bottom of a store's stack (RocksDB or in-memory).

    Bytes in, bytes out, sorted by key bytes. What restore writes into directly, and what other
    threads read through :meth:`read_view`.
    """

    @abstractmethod
    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys``, in order."""

    @abstractmethod
    def read_view(self) -> ReadView:
        """A read-only view that another thread may read while the owner writes."""

    @abstractmethod
    def reset(self, source: Path | None = None) -> None:
        """Empty the engine, or make it a copy of the local checkpoint directory ``source``."""

    @abstractmethod
    def verify(self) -> int:
        """Read every entry, checking the data is intact; the number of entries.

        Raises:
            StorageFailure: the data is damaged (on disk: a checksum does not match).
        """

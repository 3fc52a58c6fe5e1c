"""The key-value store API every engine and layer implements (Samza's ``KeyValueStore``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Generic, NamedTuple, TypeVar

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

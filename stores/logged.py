"""The changelog layer: every write to the store is also sent to its changelog partition."""

from __future__ import annotations

from collections.abc import Iterable

from samzapy.stores.base import KeyValueIterator, KeyValueStore
from samzapy.stores.changelog import ChangelogWriter


class LoggedStore(KeyValueStore[bytes, bytes]):
    """Writes to the inner store, then sends the change (key, value bytes; a delete as a
    tombstone) to the changelog (Samza's ``LoggedStore``).

    Corner cases: reads pass through untouched; a change is sent after the inner write, so a
    crash in between leaves the changelog behind the store, never ahead of it — restore throws
    away anything past the checkpoint anyway. Sends are asynchronous: they are durable once the
    producer is flushed at commit. Not thread-safe.
    """

    def __init__(self, inner: KeyValueStore[bytes, bytes], changelog: ChangelogWriter) -> None:
        self.inner = inner
        self.changelog = changelog

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` from the inner store."""
        return self.inner.get(key)

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        """The present values of ``keys`` from the inner store."""
        return self.inner.get_all(keys)

    def put(self, key: bytes, value: bytes | None) -> None:
        """Write inner, then log the change."""
        self.inner.put(key, value)
        self.changelog.send(key, value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write inner in one batch, then log every change in order."""
        entries = list(entries)
        self.inner.put_all(entries)
        send = self.changelog.send
        for key, value in entries:
            send(key, value)

    def delete(self, key: bytes) -> None:
        """Delete inner, then log a tombstone."""
        self.inner.delete(key)
        self.changelog.send(key, None)

    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator[bytes, bytes]:
        """Entries of the inner store with ``from_key <= key < to_key``."""
        return self.inner.range(from_key, to_key)

    def all(self) -> KeyValueIterator[bytes, bytes]:
        """Every entry of the inner store."""
        return self.inner.all()

    def flush(self) -> None:
        """Flush the inner store (the producer is flushed by the container at commit)."""
        self.inner.flush()

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

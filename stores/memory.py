"""The in-memory engine.

A dict plus a lazily maintained sorted key list, so that ``range`` and ``all`` follow the same
byte order as RocksDB.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from itertools import groupby

from samzapy.stores.base import Entry, KeyValueIterator, RawStore, ReadView

#: Below this many new keys (relative to the store size) they are inserted one by one;
#: above it the sorted list is rebuilt in one ``sorted()`` call.
_REBUILD_RATIO = 16


class InMemoryStore(RawStore):
    """A sorted in-memory key-value store of bytes (Samza's ``InMemoryKeyValueStore``).

    Corner cases: ``put(k, None)`` deletes; iterators work on a snapshot taken when they are
    created, so writes during iteration are not seen. Implementation: a dict holds the data;
    the sorted key list is brought up to date only when a range or ``all`` needs it (deleted
    keys are dropped from it lazily), which keeps writes O(1). Nothing survives the process:
    a logged in-memory store is always restored from scratch. Not thread-safe.
    """

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._sorted: list[bytes] = []
        self._new: set[bytes] = set()
        self._stale = 0  # deleted keys still in _sorted

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` or ``None``."""
        return self._data.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` in order."""
        return [self._data.get(key) for key in keys]

    def put(self, key: bytes, value: bytes | None) -> None:
        """Write one entry; ``None`` deletes."""
        if value is None:
            self.delete(key)
            return
        if key not in self._data:
            self._new.add(key)
        self._data[key] = value

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write every entry (atomic: nothing else runs in between)."""
        for key, value in list(entries):
            self.put(key, value)

    def delete(self, key: bytes) -> None:
        """Remove ``key``."""
        if self._data.pop(key, None) is not None:
            if key in self._new:
                self._new.discard(key)
            else:
                self._stale += 1

    def _keys(self) -> list[bytes]:
        data = self._data
        if self._stale > len(data):
            self._sorted = [k for k in self._sorted if k in data]
            self._stale = 0
        if self._new:
            keys = self._sorted
            added = sorted(self._new)
            self._new.clear()
            if len(added) * _REBUILD_RATIO < len(keys):
                for key in added:
                    at = bisect_left(keys, key)
                    if at == len(keys) or keys[at] != key:  # a deleted key put again is still there
                        keys.insert(at, key)
            else:  # merging two sorted runs: timsort does it in linear time
                self._sorted = [k for k, _ in groupby(sorted(keys + added))]
        return self._sorted

    def _snapshot(self, keys: list[bytes]) -> KeyValueIterator[bytes, bytes]:
        data = self._data
        entries = [Entry(k, data[k]) for k in keys if k in data]
        return KeyValueIterator(iter(entries))

    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator[bytes, bytes]:
        """Entries with ``from_key <= key < to_key``."""
        keys = self._keys()
        return self._snapshot(keys[bisect_left(keys, from_key) : bisect_left(keys, to_key)])

    def all(self) -> KeyValueIterator[bytes, bytes]:
        """Every entry in key order."""
        return self._snapshot(self._keys())

    def flush(self) -> None:
        """Nothing to do."""

    def read_view(self) -> ReadView:
        """A read-only view another thread may read while the task writes (the query service)."""
        return InMemoryView(self)

    def reset(self, source: object = None) -> None:
        """Drop every entry (in-memory stores always restore from scratch)."""
        self.__init__()  # type: ignore[misc]

    def verify(self) -> int:
        """Nothing on disk to damage: the number of entries."""
        return len(self._data)

    def __len__(self) -> int:
        return len(self._data)


class InMemoryView:
    """Reads an :class:`InMemoryStore` from another thread.

    Single reads are atomic under the GIL, and scans copy the dict in one C call (``dict.copy``)
    before sorting, so the owner's writes never race them. The store's dict is looked up at
    every call (a reset replaces it).
    """

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store

    def get(self, key: bytes) -> bytes | None:
        """The store's value of ``key``."""
        return self._store._data.get(key)

    def scan(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries in ``[from_key, to_key)``, in key byte order."""
        data = self._store._data.copy()
        keys = sorted(
            k for k in data if (from_key is None or k >= from_key) and (to_key is None or k < to_key)
        )
        return [(k, data[k]) for k in keys[:limit]]

    def close(self) -> None:
        """Nothing to release."""

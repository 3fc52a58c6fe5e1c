"""A tiny sorted in-memory ``KeyValueStore[bytes, bytes]`` for the operator tests.

Iterators work on a snapshot (as RocksDB iterators do), so writing while iterating is safe.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from samzapy.stores.base import Entry, KeyValueIterator, KeyValueStore


class SortedDictStore(KeyValueStore[bytes, bytes]):
    """Keys kept sorted in a list beside a dict; counts gets and puts for cost tests."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self.gets = 0
        self.puts = 0

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return self.data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.puts += 1
        if value is None:
            if self.data.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]
            return
        if key not in self.data:
            bisect.insort(self._keys, key)
        self.data[key] = value

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator[bytes, bytes]:
        lo = bisect.bisect_left(self._keys, from_key)
        hi = bisect.bisect_left(self._keys, to_key)
        return KeyValueIterator(iter([Entry(k, self.data[k]) for k in self._keys[lo:hi]]))

    def all(self) -> KeyValueIterator[bytes, bytes]:
        return KeyValueIterator(iter([Entry(k, self.data[k]) for k in self._keys]))

    def flush(self) -> None:
        pass


def test_store_keeps_keys_sorted_and_deletes() -> None:
    store = SortedDictStore()
    store.put_all([(b"b", b"2"), (b"a", b"1"), (b"c", b"3")])
    store.delete(b"b")
    assert [e.key for e in store.all()] == [b"a", b"c"]
    assert [e.value for e in store.range(b"a", b"c")] == [b"1"]

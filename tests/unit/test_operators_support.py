"""The store the operator tests run on: samzapy's in-memory engine, counting reads and writes.

Iterators work on a snapshot (as RocksDB iterators do), so writing while iterating is safe.
"""

from __future__ import annotations

from samzapy.stores.memory import InMemoryStore


class SortedDictStore(InMemoryStore):
    """:class:`InMemoryStore` that counts ``get`` and ``put`` calls, with its entries as a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.puts = 0

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return super().get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.puts += 1
        super().put(key, value)

    @property
    def data(self) -> dict[bytes, bytes]:
        """Every entry, in key order."""
        return {entry.key: entry.value for entry in self.all()}


def test_store_keeps_keys_sorted_and_deletes() -> None:
    store = SortedDictStore()
    store.put_all([(b"b", b"2"), (b"a", b"1"), (b"c", b"3")])
    store.delete(b"b")
    assert [e.key for e in store.all()] == [b"a", b"c"]
    assert [e.value for e in store.range(b"a", b"c")] == [b"1"]

"""The two engines (real rocksdict in tmp_path, and in-memory): order, bounds, atomicity."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from samzapy.stores.memory import InMemoryStore
from samzapy.stores.rocksdb import RocksDBOptions, RocksDBStore


@pytest.fixture(params=["rocksdb", "inmemory"])
def engine(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "inmemory":
        yield InMemoryStore()
        return
    store = RocksDBStore(tmp_path / "db", RocksDBOptions(cache_size_bytes=1 << 20))
    yield store
    store.close()


def test_get_put_delete(engine) -> None:
    assert engine.get(b"a") is None
    engine.put(b"a", b"1")
    assert engine.get(b"a") == b"1"
    engine.put(b"a", None)
    assert engine.get(b"a") is None
    engine.put(b"a", b"2")
    engine.delete(b"a")
    engine.delete(b"never")
    assert engine.get(b"a") is None


def test_range_is_from_inclusive_to_exclusive_in_byte_order(engine) -> None:
    keys = [b"", b"\x00", b"a", b"a\x00", b"ab", b"b", b"\xff", b"\xff\xff"]
    shuffled = keys[:]
    random.Random(1).shuffle(shuffled)
    for k in shuffled:
        engine.put(k, b"v" + k)
    assert [e.key for e in engine.all()] == keys
    with engine.range(b"a", b"b") as it:
        assert [e.key for e in it] == [b"a", b"a\x00", b"ab"]
    assert [e.key for e in engine.range(b"a\x00", b"\xff")] == [b"a\x00", b"ab", b"b"]
    assert list(engine.range(b"b", b"b")) == []
    assert list(engine.range(b"z", b"a")) == []
    assert [e.value for e in engine.range(b"ab", b"b")] == [b"vab"]


def test_range_after_deletes_and_reinserts(engine) -> None:
    rnd = random.Random(7)
    model: dict[bytes, bytes] = {}
    for i in range(3000):
        k = rnd.randrange(500).to_bytes(2, "big")
        if rnd.random() < 0.3:
            engine.delete(k)
            model.pop(k, None)
        else:
            engine.put(k, b"%d" % i)
            model[k] = b"%d" % i
        if i % 500 == 0:
            lo, hi = sorted([rnd.randrange(500).to_bytes(2, "big") for _ in range(2)])
            assert list(engine.range(lo, hi)) == sorted((k, v) for k, v in model.items() if lo <= k < hi)
    assert list(engine.all()) == sorted(model.items())


def test_put_all_and_get_all(engine) -> None:
    engine.put(b"x", b"old")
    engine.put_all([(b"a", b"1"), (b"b", b"2"), (b"x", None)])
    assert engine.get_all([b"a", b"b", b"x", b"zz"]) == {b"a": b"1", b"b": b"2"}
    engine.delete_all([b"a", b"b"])
    assert list(engine.all()) == []


def test_iterator_close_stops_iteration(engine) -> None:
    engine.put_all([(b"%d" % i, b"v") for i in range(10)])
    with engine.all() as it:
        first = next(it)
    assert first.key == b"0"
    assert list(it) == []


class CountingDB:
    """Spy around a real Rdict that counts write() calls (each is one WriteBatch)."""

    def __init__(self, db) -> None:
        self.db = db
        self.writes = 0

    def write(self, batch) -> None:
        self.writes += 1
        self.db.write(batch)

    def __getattr__(self, name: str):
        return getattr(self.db, name)


def test_rocksdb_put_all_is_one_write_batch(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "db")
    spy = CountingDB(store._db)
    store._db = spy
    store.put_all([(b"%05d" % i, b"v") for i in range(10_000)] + [(b"00001", None)])
    assert spy.writes == 1
    assert store.get(b"00001") is None and store.get(b"09999") == b"v"
    store._db = spy.db
    store.close()


@pytest.mark.parametrize("compression", ["none", "snappy", "lz4", "zstd"])
def test_rocksdb_options_open_and_persist(tmp_path: Path, compression: str) -> None:
    options = RocksDBOptions(
        cache_size_bytes=1 << 20,
        write_buffer_size_bytes=1 << 20,
        compression=compression,
        block_size_bytes=8192,
    )
    store = RocksDBStore(tmp_path / "db", options)
    store.put_all([(b"%d" % i, b"x" * 100) for i in range(2000)])
    store.close()
    again = RocksDBStore(tmp_path / "db", options)
    assert again.get(b"1999") == b"x" * 100
    again.close()


def test_rocksdb_ttl_mode_opens_and_keeps_fresh_entries(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "db", RocksDBOptions(ttl_ms=3_600_000))
    store.put(b"k", b"v")
    assert store.get(b"k") == b"v"
    assert list(store.all()) == [(b"k", b"v")]
    store.close()


def _active_memtables(stores: list[RocksDBStore]) -> int:
    """Bytes in the stores' active memtables, once no flush is pending or running."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
        s._db.property_int_value("rocksdb.num-immutable-mem-table") for s in stores
    ):
        time.sleep(0.05)
    return sum(s._db.property_int_value("rocksdb.cur-size-active-mem-table") for s in stores)


def _write(stores: list[RocksDBStore], megabytes: int) -> None:
    """``megabytes`` MiB into each store, in turns (as a container's tasks write)."""
    value = bytes(random.Random(7).randbytes(1000))  # incompressible, so sizes are what they say
    for chunk in range(megabytes * 8):
        for store in stores:
            store.put_all([(b"%d-%06d" % (chunk, i), value) for i in range(128)])


def test_one_store_shares_its_memory_budget_across_instances(tmp_path: Path) -> None:
    """Four instances of one store (four tasks) written in turns: with memtables of their own
    they hold all 16 MiB of writes in memory; sharing a 4 MiB budget, RocksDB flushes the one
    being written whenever their total passes it. A store's instances share one block cache
    of the configured size; another store has its own."""
    sizes = {"cache_size_bytes": 8 << 20, "write_buffer_size_bytes": 16 << 20}
    private = [RocksDBStore(tmp_path / f"private-{i}", RocksDBOptions(**sizes)) for i in range(4)]
    shared_sizes = dict(sizes, write_buffer_size_bytes=4 << 20)
    shared = [
        RocksDBStore(tmp_path / f"shared-{i}", RocksDBOptions(**shared_sizes, shared_by="counts"))
        for i in range(4)
    ]
    other = RocksDBStore(tmp_path / "other", RocksDBOptions(**shared_sizes, shared_by="other"))
    try:
        _write(private + shared, 4)
        assert _active_memtables(private) >= 15 << 20  # nothing bounds them: all 16 MiB in memory
        # RocksDB does not switch the memtable of a database whose last flush is still pending,
        # so under CPU load (flush threads starved) the database being written can keep filling
        # past the budget. Once no flush is pending, one more write to each, in turns, gives the
        # manager the decisions it would have made at the next writes.
        _active_memtables(shared)
        for i, store in enumerate(shared):
            store.put(b"settle-%d" % i, b"x")
        # A soft bound: the budget, plus up to one arena block (1/8 of it) per instance and
        # the writes that arrive while a flush is being scheduled.
        assert _active_memtables(shared) <= 8 << 20
        assert shared[0]._db.property_int_value("rocksdb.block-cache-capacity") == 8 << 20
        for store in shared:
            assert store.get(b"3-000127") is not None  # an early write: read from SST files, via the cache
        usages = {s._db.property_int_value("rocksdb.block-cache-usage") for s in shared}
        assert len(usages) == 1 and usages.pop() > 0  # one cache, seen by all four
        assert other._db.property_int_value("rocksdb.block-cache-usage") < 1024  # empty: not theirs
    finally:
        for store in private + shared + [other]:
            store.close()

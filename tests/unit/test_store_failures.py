"""RocksDB failures as StorageFailure, on real rocksdict files: a damaged block fails a read
or a scan (never a partial answer), a full disk fails a write naming the file and the fix,
a discarded database that fails to close is deleted anyway; the WrappedStore rules; the read
views; the path and classification doctests."""

from __future__ import annotations

import doctest
import shutil
import subprocess
from pathlib import Path

import pytest

import samzapy.stores.failures
import samzapy.stores.paths
from samzapy.errors import StorageFailure
from samzapy.stores.base import KeyValueIterator
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.rocksdb import RocksDBStore, StoreCorruptError
from samzapy.stores.rocksdb_views import ReadOnlyRocksDB
from samzapy.stores.wrapped import WrappedStore

VALUE = b"v" * 60


def test_docstring_examples() -> None:
    assert doctest.testmod(samzapy.stores.failures).failed == 0
    assert doctest.testmod(samzapy.stores.paths).failed == 0


def damaged_store(tmp_path: Path) -> tuple[RocksDBStore, Path]:
    """A store of 3000 entries in one SST, then bytes flipped in the middle of that SST."""
    store = RocksDBStore(tmp_path / "counts" / "Partition_0")
    store.put_all([(b"key-%05d" % i, VALUE) for i in range(3000)])
    store.checkpoint_to(tmp_path / "flushed")  # a checkpoint flushes the memtable into an SST
    shutil.rmtree(tmp_path / "flushed")
    store.close()
    [sst] = (tmp_path / "counts" / "Partition_0").glob("*.sst")
    size = sst.stat().st_size
    with open(sst, "r+b") as f:
        f.seek(size // 2)
        data = f.read(64)
        f.seek(size // 2)
        f.write(bytes(b ^ 0xFF for b in data))
    return RocksDBStore(tmp_path / "counts" / "Partition_0"), sst


def test_a_scan_over_a_damaged_block_fails_instead_of_ending_early(tmp_path: Path) -> None:
    store, sst = damaged_store(tmp_path)
    read = []
    with pytest.raises(StorageFailure) as info, store.all() as it:
        read.extend(it)
    assert 0 < len(read) < 3000  # what RocksDB returned before the block: never presented as all
    message = str(info.value)
    assert f"store 'counts' (Partition_0) at '{sst.parent}'" in message
    assert f"file {sst}" in message and "damaged" in message and "block checksum mismatch" in message
    assert "rebuilds the store from the changelog" in message
    assert info.value.store == "counts" and info.value.path == str(sst)
    store.close()


def test_a_point_read_of_a_damaged_block_raises_storage_failure(tmp_path: Path) -> None:
    store, sst = damaged_store(tmp_path)
    failures = []
    for i in range(3000):
        try:
            store.get(b"key-%05d" % i)
        except StorageFailure as exc:
            failures.append(exc)
    assert failures and all(f.path == str(sst) for f in failures)
    with pytest.raises(StorageFailure):
        store.read_view().scan(None, None, 10_000)
    with pytest.raises(StoreCorruptError, match="damaged"):
        store.verify()
    store.close()


def test_a_read_only_copy_of_a_damaged_store_fails_its_scan(tmp_path: Path) -> None:
    store, _ = damaged_store(tmp_path)
    store.close()
    view = ReadOnlyRocksDB(tmp_path / "counts" / "Partition_0")
    assert len(view.scan(None, None, 10)) == 10  # a limit reached before the block is complete
    with pytest.raises(StorageFailure, match="after [0-9,]+ entries; what was read is incomplete"):
        view.scan(None, None, 10_000)
    view.close()


def test_programming_errors_are_not_storage_failures(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "s" / "Partition_0")
    with pytest.raises(KeyError, match="raw mode only support bytes"):
        store.get("not bytes")  # type: ignore[arg-type]
    store.close()


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 3 MB tmpfs (needs root); skipped, with the reason, where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({result.stderr.strip() or result.returncode})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_the_write_naming_the_file_and_the_fix(tiny_disk: Path) -> None:
    store = RocksDBStore(tiny_disk / "counts" / "Partition_3")
    with pytest.raises(StorageFailure) as info:
        for batch in range(1000):
            store.put_all([(b"k%d-%d" % (batch, i), b"x" * 1000) for i in range(100)])
    message = str(info.value)
    assert "store 'counts' (Partition_3)" in message and "the disk is full while writing" in message
    assert ".log" in info.value.path  # the write-ahead log RocksDB was appending to
    assert "free space on the volume of" in message and "nothing after the last commit" in message
    # the discarded database fails to close (the disk is still full): logged, not raised; its
    # files are deleted, which frees the disk, and the empty store opens and works again
    store.reset(None)
    store.put(b"after", b"reset")
    assert dict(store.all()) == {b"after": b"reset"}
    store.close()


def test_a_layer_overriding_put_but_not_put_all_is_refused() -> None:
    with pytest.raises(TypeError, match="overrides put but not put_all: calls of those would bypass"):

        class Half(WrappedStore):  # noqa: F841 - defining it is the test
            def put(self, key, value):
                self.inner.put(key, value)


def test_a_wrapped_store_passes_through_what_it_does_not_change() -> None:
    class Upper(WrappedStore):
        def get(self, key):
            value = self.inner.get(key)
            return None if value is None else value.upper()

        def range(self, from_key, to_key):
            return self.inner.range(from_key, to_key)

        def all(self):
            return self.inner.all()

    engine = InMemoryStore()
    layer = Upper(engine)
    layer.put(b"a", b"x")
    layer.put_all([(b"b", b"y"), (b"c", None)])
    layer.delete(b"b")
    assert layer.get(b"a") == b"X"
    assert layer.get_all([b"a", b"b"]) == {b"a": b"X"}  # built on the layer's own get
    assert dict(engine.all()) == {b"a": b"x"}
    assert list(layer.layers()) == [layer, engine]
    assert isinstance(layer.all(), KeyValueIterator)


def test_read_views_see_the_engine_and_follow_a_reset(tmp_path: Path) -> None:
    for engine in (InMemoryStore(), RocksDBStore(tmp_path / "s" / "Partition_0")):
        view = engine.read_view()
        engine.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
        assert view.get(b"b") == b"2"
        assert view.scan(b"b", None, 10) == [(b"b", b"2"), (b"c", b"3")]
        assert view.scan(None, b"c", 1) == [(b"a", b"1")]
        engine.reset(None)
        assert view.get(b"a") is None and view.scan(None, None, 10) == []
        engine.close()

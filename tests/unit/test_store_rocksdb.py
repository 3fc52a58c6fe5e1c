"""RocksDB directories: corruption, locks (live and stale), local checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from samzapy.errors import StoreLockedError
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.rocksdb import RocksDBStore, StoreCorruptError

HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from samzapy.stores.rocksdb import RocksDBStore
    store = RocksDBStore(Path(sys.argv[1]))
    store.put(b"held", b"yes")
    print("locked", flush=True)
    time.sleep(600)
    """
)


def hold_lock(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_corrupted_store_dir_is_wiped_and_reopened_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "db"
    store = RocksDBStore(path)
    store.put(b"a", b"1")
    store.close()
    (path / "CURRENT").write_text("garbage\n")
    again = RocksDBStore(path)
    assert again.get(b"a") is None
    again.put(b"b", b"2")
    assert again.get(b"b") == b"2"
    assert "does not open" in caplog.text and "wiping" in caplog.text
    again.close()


def test_garbage_files_dir_is_wiped(tmp_path: Path) -> None:
    path = tmp_path / "db"
    path.mkdir()
    (path / "CURRENT").write_bytes(os.urandom(64))
    (path / "MANIFEST-000001").write_bytes(os.urandom(4096))
    store = RocksDBStore(path)
    assert list(store.all()) == []
    store.close()


def test_stale_lock_from_killed_process_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / "db"
    proc = hold_lock(path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (path / "LOCK").exists()
    started = time.monotonic()
    store = RocksDBStore(path, lock_timeout_s=5)
    assert time.monotonic() - started < 2
    assert store.get(b"held") == b"yes"  # the killed process's write survived (WAL)
    assert (path / "LOCK").exists()
    store.close()


def test_live_lock_raises_store_locked_after_deadline(tmp_path: Path) -> None:
    path = tmp_path / "db"
    proc = hold_lock(path)
    try:
        started = time.monotonic()
        with pytest.raises(StoreLockedError, match=str(path)):
            RocksDBStore(path, lock_timeout_s=0.5)
        assert 0.5 <= time.monotonic() - started < 5
        assert (path / "LOCK").exists()
    finally:
        proc.kill()
        proc.wait()


def test_lock_released_within_deadline_is_acquired(tmp_path: Path) -> None:
    path = tmp_path / "db"
    proc = hold_lock(path)
    subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -9 {proc.pid}"])
    store = RocksDBStore(path, lock_timeout_s=10)
    assert store.get(b"held") == b"yes"
    store.close()
    proc.wait()


def test_local_checkpoints_keep_newest_and_reset_restores_them(tmp_path: Path) -> None:
    live = tmp_path / "s" / "Partition_0"
    store = RocksDBStore(live)
    checkpoints = LocalCheckpoints(live, "s-changelog", 0, keep=2)
    for offset in (10, 20, 30):
        store.put(b"k", b"%d" % offset)
        checkpoints.create(store, offset)
    assert checkpoints.create(store, 30) is None  # already there
    found = checkpoints.newest_first()
    assert [c.offset for c in found] == [30, 20]
    assert json.loads((found[0].path / "OFFSET").read_text()) == {
        "topic": "s-changelog",
        "partition": 0,
        "offset": 30,
    }
    store.put(b"k", b"ahead")
    store.reset(found[1].path)
    assert store.get(b"k") == b"20"
    store.put(b"k", b"changed")  # writing the live copy leaves the checkpoint alone
    store.reset(found[1].path)
    assert store.get(b"k") == b"20"
    store.close()


@pytest.mark.parametrize(
    "content",
    [
        "",
        "garbage",
        '{"offset": -1, "topic": "t", "partition": 0}',
        '{"offset": 5, "topic": "other", "partition": 0}',
        None,
    ],
)
def test_checkpoint_with_bad_offset_file_is_ignored(tmp_path: Path, content: str | None) -> None:
    live = tmp_path / "Partition_0"
    store = RocksDBStore(live)
    checkpoints = LocalCheckpoints(live, "t", 0)
    checkpoints.create(store, 5)
    offset_file = checkpoints.newest_first()[0].path / "OFFSET"
    if content is None:
        offset_file.unlink()
    else:
        offset_file.write_text(content)
    assert checkpoints.newest_first() == []
    store.close()


def test_reset_from_a_corrupt_checkpoint_raises_and_leaves_store_empty(tmp_path: Path) -> None:
    live = tmp_path / "Partition_0"
    store = RocksDBStore(live)
    store.put(b"a", b"1")
    checkpoints = LocalCheckpoints(live, "t", 0)
    path = checkpoints.create(store, 1)
    assert path is not None
    (path / "CURRENT").write_text("nonsense\n")
    with pytest.raises(StoreCorruptError):
        store.reset(path)
    assert list(store.all()) == []
    store.close()

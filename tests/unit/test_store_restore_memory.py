"""Restore on the in-memory changelog, without a broker: the base (local checkpoint, never the
live store, else scratch), the replay up to K, the trim beyond K, wiped and damaged stores.
Real RocksDB files in tmp_path; the broker tests of the same steps are in
tests/integration/test_store_restore.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from samzapy.config.model import StoreConfig
from samzapy.errors import RestoreError
from samzapy.metrics import MetricsGroup
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.paths import checkpoints_dir, store_dir
from samzapy.streams import SystemStream
from samzapy.testing import InMemoryChangelog, TaskHarness

VALUE = b"v" * 60


def build(base: Path, log: InMemoryChangelog, engine: str = "rocksdb") -> StorageEngine:
    config = StoreConfig(
        "s",
        engine=engine,
        changelog=SystemStream("kafka", log.topic),
        object_cache_size=0,
        changelog_coalesce=False,
    )
    return build_store(
        config,
        partition=0,
        base_dir=base,
        key_serde=None,
        msg_serde=None,
        changelog=log,
        metrics=MetricsGroup("store.s.Partition 0"),
    )


def commit(engine: StorageEngine, local: bool = True) -> int:
    """The container's commit for one store: flush, read the changelog offset, checkpoint."""
    engine.flush()
    offset = engine.changelog_offset()
    assert offset is not None
    if local:
        engine.checkpoint(offset)
    return offset


def contents(engine: StorageEngine) -> dict[bytes, bytes]:
    with engine.all() as it:
        return dict(it)


def write(engine: StorageEngine, keys: range, tag: bytes = b"") -> None:
    engine.put_all([(b"key-%05d" % i, VALUE + tag) for i in keys])


def damage(sst: Path) -> None:
    """Flip 64 bytes in the middle of an SST file, in place (every hard link sees it)."""
    size = sst.stat().st_size
    with open(sst, "r+b") as f:
        f.seek(size // 3)
        data = f.read(64)
        f.seek(size // 3)
        f.write(bytes(b ^ 0xFF for b in data))


def ssts(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*.sst")}


@pytest.fixture
def log() -> InMemoryChangelog:
    return InMemoryChangelog("s-changelog", 0)


def test_restore_replays_the_changelog_up_to_k_and_no_further(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(100))
    live.delete(b"key-00007")
    k = commit(live, local=False)
    expected = contents(live)
    write(live, range(100, 150), b"-late")  # after K: never committed
    live.flush()
    live.close()

    fresh = build(tmp_path, log)
    stats = fresh.restore(k)

    assert contents(fresh) == expected
    assert (stats.base_offset, stats.restored_messages, stats.trimmed_messages) == (None, k + 1, 50)
    fresh.close()


def test_restore_starts_from_the_newest_local_checkpoint_at_or_below_k(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(50))
    first = commit(live)
    write(live, range(50, 80))
    second = commit(live)
    write(live, range(80, 90))
    k = commit(live, local=False)
    expected = contents(live)
    live.close()

    fresh = build(tmp_path, log)
    stats = fresh.restore(k)

    assert first < second < k
    assert stats.base_offset == second
    assert stats.restored_messages == k - second  # only the tail after the checkpoint
    assert contents(fresh) == expected
    fresh.close()


def test_a_local_checkpoint_beyond_k_is_deleted_and_an_older_one_used(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(40))
    k = commit(live)
    expected = contents(live)
    write(live, range(40, 60), b"-late")
    ahead = commit(live)  # a local checkpoint whose Kafka checkpoint never landed (a crash)
    live.close()

    fresh = build(tmp_path, log)
    stats = fresh.restore(k)

    assert stats.base_offset == k
    assert contents(fresh) == expected
    remaining = [c.offset for c in LocalCheckpoints(fresh.store_dir, log.topic, 0).newest_first()]
    assert remaining == [k] and ahead > k
    fresh.close()


def test_the_live_store_is_never_trusted(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(30))
    k = commit(live)
    expected = contents(live)
    # written straight into the engine after K, not logged: a crash left the live store ahead
    live.raw.put_all([(b"zz-uncommitted", b"x"), (b"key-00001", b"changed")])
    live.close()

    fresh = build(tmp_path, log)
    stats = fresh.restore(k)

    assert stats.base_offset == k
    assert contents(fresh) == expected
    fresh.close()


def test_trim_sets_the_changelog_back_to_the_state_at_k(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(20))
    k = commit(live)
    live.put(b"key-00003", b"after-k")  # a changed key
    live.delete(b"key-00004")  # a deleted key
    live.put(b"new-after-k", b"n")  # a created key
    live.flush()
    live.close()

    fresh = build(tmp_path, log)
    stats = fresh.restore(k)

    assert stats.trimmed_messages == 3
    assert stats.trim_writes == 3
    assert log.records[-3:] == [(b"key-00003", VALUE), (b"key-00004", VALUE), (b"new-after-k", None)]
    assert log.latest() == contents(fresh)
    assert fresh.changelog_offset() == log.end_offset() - 1  # the trim writes are acknowledged
    fresh.close()


def test_nothing_committed_restores_empty_and_tombstones_every_key(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(10))
    live.flush()
    live.close()

    fresh = build(tmp_path, log)
    stats = fresh.restore(None)

    assert contents(fresh) == {}
    assert log.latest() == {}
    assert (stats.base_offset, stats.restored_messages, stats.trimmed_messages) == (None, 0, 10)
    assert not checkpoints_dir(store_dir(tmp_path, "s", 0)).exists()
    fresh.close()


def test_a_wiped_store_is_rebuilt_from_the_changelog(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(200))
    k = commit(live)
    expected = contents(live)
    live.close()
    shutil.rmtree(tmp_path / "s")  # the live directory and its local checkpoints

    fresh = build(tmp_path, log)
    stats = fresh.restore(k)

    assert (stats.base_offset, stats.restored_messages) == (None, k + 1)
    assert contents(fresh) == expected
    fresh.close()


def test_a_compacted_changelog_with_offset_gaps_restores_exactly(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    for round_ in range(3):
        write(live, range(50), b"-%d" % round_)
    live.delete(b"key-00010")
    k = commit(live, local=False)
    expected = contents(live)
    live.close()
    log.compact()

    fresh = build(tmp_path, log)
    fresh.restore(k)

    assert len(log.entries) == 50 and log.end_offset() == k + 1
    assert contents(fresh) == expected
    fresh.close()


def test_a_damaged_newest_checkpoint_falls_back_to_an_older_one(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(2000))
    older = commit(live)
    write(live, range(2000, 4000))
    newer = commit(live)
    expected = contents(live)
    live.close()
    checkpoints = checkpoints_dir(store_dir(tmp_path, "s", 0))
    only_newer = ssts(checkpoints / str(newer)) - ssts(checkpoints / str(older))
    assert only_newer, "the second checkpoint should hold an SST of its own"
    damage(checkpoints / str(newer) / sorted(only_newer)[0])

    fresh = build(tmp_path, log)
    stats = fresh.restore(newer)

    assert stats.base_offset == older
    assert stats.restored_messages == newer - older
    assert contents(fresh) == expected
    assert not (checkpoints / str(newer)).exists()  # a damaged checkpoint is never tried again
    fresh.close()


def test_a_damaged_file_shared_by_every_checkpoint_falls_back_to_the_changelog(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(2000))
    older = commit(live)
    write(live, range(2000, 3000))
    newer = commit(live)
    expected = contents(live)
    live.close()
    checkpoints = checkpoints_dir(store_dir(tmp_path, "s", 0))
    shared = ssts(checkpoints / str(newer)) & ssts(checkpoints / str(older))
    assert shared, "local checkpoints hard-link the SST files they share"
    damage(checkpoints / str(older) / sorted(shared)[0])  # the live store shares it too

    fresh = build(tmp_path, log)
    stats = fresh.restore(newer)

    assert (stats.base_offset, stats.restored_messages) == (None, newer + 1)
    assert contents(fresh) == expected
    fresh.close()


def test_the_in_memory_engine_restores_from_scratch(tmp_path: Path, log) -> None:
    live = build(tmp_path, log, engine="inmemory")
    write(live, range(30))
    k = commit(live)
    write(live, range(30, 40))
    live.flush()
    expected = {b"key-%05d" % i: VALUE for i in range(30)}

    fresh = build(tmp_path, log, engine="inmemory")
    stats = fresh.restore(k)

    assert (stats.base_offset, stats.restored_messages, stats.trimmed_messages) == (None, 30, 10)
    assert contents(fresh) == expected


def test_k_beyond_the_changelog_end_fails(tmp_path: Path, log) -> None:
    live = build(tmp_path, log)
    write(live, range(3))
    live.flush()
    with pytest.raises(RestoreError, match=r"offset 10 of InMemoryChangelog\('s-changelog', 0, 3 records\)"):
        live.restore(10)
    live.close()


HARNESS_CONFIG = {
    "job.name": "counting",
    "task.inputs": "kafka.words",
    "stores.counts.factory": "rocksdb",
    "stores.counts.changelog": "kafka.counts-changelog",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "long",
    "stores.counts.object.cache.size": "10",
    "stores.counts.write.batch.size": "5",
}


class CountingTask:
    def init(self, context):
        self.counts = context.get_store("counts")

    def process(self, envelope, collector, coordinator):
        self.counts.put(envelope.key, (self.counts.get(envelope.key) or 0) + 1)


def test_the_harness_restores_a_tasks_stores_into_fresh_ones() -> None:
    harness = TaskHarness(CountingTask, HARNESS_CONFIG)
    for word in ["a", "b", "a", "c", "a", "b"]:
        harness.send("kafka.words", word, word)
    harness.commit()
    committed = harness.changelogs["counts"].offset()
    for word in ["a", "d"]:
        harness.send("kafka.words", word, word)
    harness.commit()

    to_end = harness.restore_stores()["counts"]
    to_committed = harness.restore_stores({"counts": committed})["counts"]

    assert dict(to_end.all()) == dict(harness.stores["counts"].all()) == {"a": 4, "b": 2, "c": 1, "d": 1}
    assert dict(to_committed.all()) == {"a": 3, "b": 2, "c": 1}
    assert to_end.raw.path != harness.stores["counts"].raw.path  # fresh engines, new directories
    assert harness.changelogs["counts"].latest()[b"a"] == (4).to_bytes(8, "big")  # left as it was
    harness.close()

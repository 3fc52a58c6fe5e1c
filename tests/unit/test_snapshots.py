"""Store snapshots in a directory blob store, without a broker: incremental uploads, restores
from a snapshot equal to restores from the changelog and to the live store, damaged and
missing snapshots, retention against a concurrent uploader, a blob store that is down, a
kill -9 during an upload. Real RocksDB files in tmp_path; the in-memory changelog."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from samzapy.checkpoint import ChangelogFence
from samzapy.config.model import StoreConfig
from samzapy.metrics import MetricsGroup
from samzapy.stores.blob_store import BlobStoreError, DirectoryBlobStore
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.paths import checkpoints_dir, snapshot_staging_dir, store_dir
from samzapy.stores.snapshot_index import SnapshotIndex, SnapshotLayout, TaskSnapshots
from samzapy.stores.snapshot_restore import SnapshotSource
from samzapy.stores.snapshot_retention import sweep
from samzapy.stores.snapshot_upload import SnapshotMeta, SnapshotSettings, SnapshotUploader, upload_snapshot
from samzapy.streams import SystemStream
from samzapy.testing import InMemoryChangelog

VALUE = b"v" * 100
LAYOUT = SnapshotLayout("job-1", "s", 0)


def build(base: Path, log: InMemoryChangelog) -> StorageEngine:
    config = StoreConfig(
        "s", changelog=SystemStream("kafka", log.topic), object_cache_size=0, changelog_coalesce=False
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


def commit(engine: StorageEngine) -> int:
    """The container's commit for one store: flush, changelog offset, local checkpoint."""
    engine.flush()
    offset = engine.changelog_offset()
    assert offset is not None
    engine.checkpoint(offset)
    return offset


def write(engine: StorageEngine, keys: range, tag: bytes = b"") -> None:
    engine.put_all([(b"key-%06d" % i, VALUE + tag) for i in keys])


def contents(engine: StorageEngine) -> dict[bytes, bytes]:
    with engine.all() as it:
        return dict(it)


def meta(offset: int, generation: int = 1, log: str = "s-changelog") -> SnapshotMeta:
    return SnapshotMeta("Partition 0", "s", log, 0, offset, generation)


def upload(blob: DirectoryBlobStore, engine: StorageEngine, offset: int, generation: int = 1, **kw):
    directory = checkpoints_dir(engine.store_dir) / str(offset)
    return upload_snapshot(blob, LAYOUT, directory, meta(offset, generation), **kw)


def restored(base: Path, log: InMemoryChangelog, k: int, source: SnapshotSource | None, fence=None):
    """A fresh machine's restore (no local files) to offset ``k``: its contents and stats."""
    engine = build(base, log)
    stats = engine.restore(k, trusted_local=False, snapshots=source, fence=fence)
    found = contents(engine)
    engine.close()
    return found, stats


@pytest.fixture
def log() -> InMemoryChangelog:
    return InMemoryChangelog("s-changelog", 0)


@pytest.fixture
def blob(tmp_path: Path) -> DirectoryBlobStore:
    return DirectoryBlobStore(tmp_path / "blobs")


def test_a_second_snapshot_after_a_small_change_uploads_only_the_new_files(tmp_path, log, blob) -> None:
    engine = build(tmp_path / "live", log)
    for part in range(3):  # three SST files
        write(engine, range(part * 2000, (part + 1) * 2000))
        commit(engine)  # a checkpoint flushes the memtable: one more SST
    first = upload(blob, engine, commit(engine))
    assert first is not None and first.files_reused == 0
    assert first.files_uploaded == len(first.index.files)
    write(engine, range(100, 110), b"changed")
    commit(engine)  # a checkpoint flushes the memtable: one more SST
    second = upload(blob, engine, commit(engine))
    assert second is not None
    old = {f.sha256 for f in first.index.files}
    new_files = [f for f in second.index.files if f.sha256 not in old]
    assert second.files_uploaded == len(new_files)  # counted: only what the first lacks
    assert second.files_reused == len(second.index.files) - len(new_files)
    old_ssts = {f.name for f in first.index.files if f.name.endswith(".sst")}
    assert old_ssts and old_ssts <= {f.name for f in second.index.files}  # SSTs referenced again
    assert all(f.key in {g.key for g in first.index.files} for f in second.index.files if f.name in old_ssts)
    assert second.bytes_uploaded < first.bytes_uploaded / 2
    engine.close()


def test_restore_from_a_snapshot_equals_the_changelog_restore_and_the_live_store(tmp_path, log, blob) -> None:
    engine = build(tmp_path / "live", log)
    write(engine, range(5000))
    snap_offset = commit(engine)
    assert upload(blob, engine, snap_offset) is not None
    write(engine, range(4000, 6000), b"2")
    engine.delete_all([b"key-%06d" % i for i in range(10, 20)])
    k = commit(engine)
    live = contents(engine)
    engine.close()
    from_snapshot, stats = restored(tmp_path / "a", log, k, SnapshotSource(blob, LAYOUT))
    from_changelog, full = restored(tmp_path / "b", log, k, None)
    assert from_snapshot == from_changelog == live
    assert stats.base_offset == snap_offset  # replayed only the changelog after the snapshot
    assert stats.restored_messages == k - snap_offset
    assert full.restored_messages == k + 1


def test_a_damaged_snapshot_is_skipped_for_the_previous_then_the_changelog(
    tmp_path, log, blob, caplog
) -> None:
    engine = build(tmp_path / "live", log)
    write(engine, range(3000))
    older = commit(engine)
    first = upload(blob, engine, older)
    write(engine, range(3000, 4000))
    commit(engine)  # a checkpoint flushes the memtable: one more SST
    newer = commit(engine)
    second = upload(blob, engine, newer)
    live = contents(engine)
    engine.close()
    changed = next(f for f in second.index.files if f.sha256 not in {g.sha256 for g in first.index.files})
    path = blob.root / LAYOUT.full(changed.key)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes: only the checksum can tell
    path.write_bytes(bytes(data))
    caplog.set_level("INFO")
    found, stats = restored(tmp_path / "a", log, newer, SnapshotSource(blob, LAYOUT))
    assert found == live and stats.base_offset == older
    assert f"snapshot {second.index.name}" in caplog.text and "SHA-256" in caplog.text
    for f in first.index.files:  # the previous one damaged too: the changelog alone
        (blob.root / LAYOUT.full(f.key)).unlink(missing_ok=True)
    caplog.clear()
    found, stats = restored(tmp_path / "b", log, newer, SnapshotSource(blob, LAYOUT))
    assert found == live and stats.base_offset is None and stats.restored_messages == newer + 1
    assert "restoring from the changelog alone" in caplog.text


def test_a_snapshot_beyond_the_checkpoint_or_a_zombies_after_the_takeover_is_not_used(
    tmp_path, log, blob
) -> None:
    engine = build(tmp_path / "live", log)
    write(engine, range(1000))
    k = commit(engine)
    upload(blob, engine, k, generation=1)
    write(engine, range(1000, 1200))
    beyond = commit(engine)
    upload(blob, engine, beyond, generation=1)  # a commit whose checkpoint never landed
    engine.close()
    _, stats = restored(tmp_path / "a", log, k, SnapshotSource(blob, LAYOUT))
    assert stats.base_offset == k
    fence = ChangelogFence(start=k - 1, generation=2)  # generation 2 took over before offset k
    fresh = LocalCheckpoints(store_dir(tmp_path / "b", "s", 0), log.topic, 0)
    source = SnapshotSource(blob, LAYOUT)
    assert source.fetch(fresh, beyond, fence, log.end_offset()) is None  # both are generation 1's
    assert source.fetch(fresh, beyond, ChangelogFence(start=k, generation=2), log.end_offset()) == k


def test_retention_keeps_the_newest_and_deletes_files_only_after_the_grace(tmp_path, log, blob) -> None:
    engine = build(tmp_path / "live", log)
    now = [1000.0]
    results = []
    for round_ in range(4):
        write(engine, range(round_ * 1000, (round_ + 1) * 1000))
        commit(engine)  # a checkpoint flushes the memtable: one more SST
        results.append(upload(blob, engine, commit(engine), clock=lambda: now[0]))
    engine.close()
    stats = sweep(blob, LAYOUT, keep=2, grace_s=60, clock=lambda: now[0])
    view = TaskSnapshots(blob, LAYOUT)
    assert view.index_names == sorted(r.index.name for r in results[2:])
    kept = {f.key for r in results[2:] for f in r.index.files}
    garbage = set(view.files) - kept
    assert stats.indexes_deleted == 2 and garbage and view.marked == garbage and stats.files_deleted == 0
    now[0] += 59
    assert sweep(blob, LAYOUT, keep=2, grace_s=60, clock=lambda: now[0]).files_deleted == 0
    now[0] += 1
    assert sweep(blob, LAYOUT, keep=2, grace_s=60, clock=lambda: now[0]).files_deleted == len(garbage)
    view.refresh()
    assert set(view.files) == kept and not view.marked


def test_two_members_never_delete_each_others_files(tmp_path, blob) -> None:
    """An old owner (generation 1) and a new one (generation 2) of one task upload and sweep
    the same prefix in turns, with retention 1 and a grace the clock crosses: every snapshot
    either of them published stays whole while it is kept, and every file a kept index names
    is there."""
    now = [0.0]
    members = []
    for generation in (1, 2):
        log = InMemoryChangelog("s-changelog", 0)
        members.append((generation, build(tmp_path / f"m{generation}", log)))
    for round_ in range(6):
        for generation, engine in members:
            write(engine, range(round_ * 500, round_ * 500 + 500), b"%d" % generation)
            commit(engine)  # a checkpoint flushes the memtable: one more SST
            result = upload(blob, engine, commit(engine), generation, clock=lambda: now[0])
            assert result is not None
            now[0] += 40  # a sweep by either member comes between the other's listing and index
            sweep(blob, LAYOUT, keep=1, grace_s=60, clock=lambda: now[0])
            view = TaskSnapshots(blob, LAYOUT)
            for index in view.readable_indexes():
                for f in index.files:
                    assert f.key in view.files, (generation, round_, f)
    for _, engine in members:
        engine.close()


class _Down(DirectoryBlobStore):
    """A blob store whose service is down until ``up`` is set (its calls fail as an unreachable one's)."""

    up = False

    def _check(self) -> None:
        if not self.up:
            raise BlobStoreError("connection refused (the test's blob store is down)")

    def put_file(self, key, path):
        self._check()
        super().put_file(key, path)

    def put_bytes(self, key, data):
        self._check()
        super().put_bytes(key, data)

    def list(self, prefix):
        self._check()
        return super().list(prefix)


def test_a_blob_store_that_is_down_delays_snapshots_and_never_blocks_commits(tmp_path, log) -> None:
    blob = _Down(tmp_path / "blobs")
    metrics = MetricsGroup("container")
    uploader = SnapshotUploader(blob, "job-1", SnapshotSettings(max_pending=1, max_wait_s=0.01), metrics)
    engine = build(tmp_path / "live", log)
    try:
        offsets = []
        for round_ in range(5):
            write(engine, range(round_ * 100, round_ * 100 + 100))
            offsets.append(commit(engine))
            uploader.enqueue("Partition 0", "s", engine, meta(offsets[-1]))
        assert uploader.completed("Partition 0") == {}
        assert engine.metrics.snapshot()["snapshot-lag-records"] == offsets[-1] + 1
        staged = list(snapshot_staging_dir(engine.store_dir).iterdir())
        assert len(staged) <= 2  # at most the one being tried and the newest queued
        blob.up = True
        assert uploader.wait_idle(60)
        done = uploader.completed("Partition 0")["s"]
        assert done.split("-")[1] == f"{offsets[-1]:020d}"  # the newest: older ones were replaced
        assert engine.metrics.snapshot()["snapshot-lag-records"] == 0
        counts = metrics.snapshot()
        assert counts["snapshot-upload-failures"] >= 1 and counts["snapshots-uploaded"] == 1
        assert not any(snapshot_staging_dir(engine.store_dir).iterdir())
    finally:
        uploader.close(0)
        engine.close()


def test_kill_9_during_an_upload_leaves_no_snapshot_visible(tmp_path, log, blob) -> None:
    engine = build(tmp_path / "live", log)
    for part in range(3):
        write(engine, range(part * 1000, (part + 1) * 1000))
        commit(engine)  # a checkpoint flushes the memtable: one more SST
    offset = commit(engine)
    engine.close()
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from samzapy.stores.blob_store import DirectoryBlobStore
        from samzapy.stores.snapshot_index import SnapshotLayout
        from samzapy.stores.snapshot_upload import SnapshotMeta, upload_snapshot
        upload_snapshot(
            DirectoryBlobStore(Path({str(blob.root)!r})),
            SnapshotLayout("job-1", "s", 0),
            Path({str(checkpoints_dir(store_dir(tmp_path / "live", "s", 0)) / str(offset))!r}),
            SnapshotMeta("Partition 0", "s", "s-changelog", 0, {offset}, 1),
        )
        """
    )
    env = dict(os.environ, SAMZAPY_CRASH_AT="during-snapshot-upload:2")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    view = TaskSnapshots(blob, LAYOUT)
    assert view.index_names == [] and len(view.files) == 2  # two files sent, no index: no snapshot
    found, stats = restored(tmp_path / "a", log, offset, SnapshotSource(blob, LAYOUT))
    assert stats.base_offset is None and len(found) == 3000
    assert sweep(blob, LAYOUT, keep=3, grace_s=0).files_marked == 2  # orphans go after the grace
    assert sweep(blob, LAYOUT, keep=3, grace_s=0).files_deleted == 2


def test_the_index_round_trips_and_names_sort_by_generation_then_offset() -> None:
    index = SnapshotIndex("Partition 2", "s", "log", 2, 99, 4, 3, {"kafka.in/2": 7}, (), 5, "ab")
    assert SnapshotIndex.from_bytes(index.to_bytes()) == index
    names = [SnapshotIndex("P", "s", "l", 0, o, g, upload_id="x").name for g, o in ((1, 500), (2, 3), (1, 7))]
    assert sorted(names) == [names[2], names[0], names[1]]
    with pytest.raises(ValueError, match="not a snapshot index"):
        SnapshotIndex.from_bytes(json.dumps({"version": 1}).encode())


def test_local_checkpoints_newer_than_every_snapshot_are_used_without_a_download(
    tmp_path, log, blob, caplog
) -> None:
    engine = build(tmp_path / "live", log)
    write(engine, range(1000))
    upload(blob, engine, commit(engine))
    write(engine, range(1000, 1100))
    k = commit(engine)
    engine.close()
    caplog.set_level("INFO")
    reopened = build(tmp_path / "live", log)
    stats = reopened.restore(k, snapshots=SnapshotSource(blob, LAYOUT))
    reopened.close()
    assert stats.base_offset == k and "not downloaded" in caplog.text
    assert LocalCheckpoints(store_dir(tmp_path / "live", "s", 0), log.topic, 0).newest_first()[0].offset == k

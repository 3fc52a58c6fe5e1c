"""The Spark bulk restore of a job with blob-store backups starts each store partition from its
newest usable snapshot and reads only the changelog after it (issue 30 item 3); a damaged
snapshot falls back to the changelog. The stores equal the sequential restore's."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import write_config
from test_spark_restore import (
    PARTITIONS,
    idle_job,
    produce_changes,
    sequential_restore,
    store_items,
    write_checkpoints,
)

from samzapy.checkpoint import read_checkpoints
from samzapy.config import load_config, parse_job_config
from samzapy.spark.restore import bulk
from samzapy.spark.restore.bulk import restore_for_container, restore_stores
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.stores.snapshot_index import SnapshotLayout, job_label
from samzapy.stores.snapshot_upload import SnapshotMeta, upload_snapshot
from samzapy.stores.snapshots import job_blob_store

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def snapshot_at(job, changelog: str, partition: int, offset: int, work: Path, broker: str) -> None:
    """Upload the sequential restore's store of ``partition`` at ``offset`` as its snapshot."""
    sequential_restore(job, work, partition, offset, broker)
    live = work / "counts" / f"Partition_{partition}"
    checkpoints = LocalCheckpoints(live, changelog, partition)
    store = RocksDBStore(live)
    try:  # the restore may have left one at that offset already
        directory = checkpoints.create(store, offset) or checkpoints.root / str(offset)
    finally:
        store.close()
    layout = SnapshotLayout(job_label(job.job_name, job.job_id), "counts", partition)
    meta = SnapshotMeta(f"Partition {partition}", "counts", changelog, partition, offset, generation=1)
    assert upload_snapshot(job_blob_store(job), layout, directory, meta) is not None


def test_the_bulk_restore_starts_from_the_newest_snapshot_and_reads_only_the_changelog_after_it(
    tmp_path, broker, spark, topic_name
):
    changelog, props = idle_job(broker, f"bulk-snap-{abs(hash(topic_name)) % 10**8}")
    props["stores.counts.backup.factories"] = "kafka,blobstore"
    props["blob.store.uri"] = f"file://{tmp_path / 'blobs'}"
    config_path = write_config(tmp_path / "job.properties", props)
    job = parse_job_config(load_config(config_path))
    first = produce_changes(broker, changelog, 4_000, seed=31)
    for partition in (0, 1):
        snapshot_at(job, changelog, partition, first[partition], tmp_path / "snap", broker)
    damaged = max((tmp_path / "blobs").glob("**/Partition_1/files/*"), key=lambda f: f.stat().st_size)
    damaged.write_bytes(b"x" * damaged.stat().st_size)  # same size, wrong checksum
    last = produce_changes(broker, changelog, 2_000, seed=32)  # overwrites and tombstones

    expected = {p: sequential_restore(job, tmp_path / "seq", p, last[p], broker) for p in range(PARTITIONS)}
    for plan, limit in (("in-memory", 1_000_000), ("sort", 0)):  # both plans (bulk.py's docstring)
        restored = restore_stores(config_path, tmp_path / plan, in_memory_max_records=limit)
        stats = {s.partition: s for s in restored.partitions}
        assert stats[0].records == last[0] - first[0], plan  # the snapshot, then only what follows
        for partition in (1, 2, 3):  # a damaged snapshot, or none: the whole changelog
            assert stats[partition].records == last[partition] + 1, plan
        for partition in range(PARTITIONS):
            assert stats[partition].offset == last[partition], plan
            live = tmp_path / plan / "counts" / f"Partition_{partition}"
            assert store_items(live) == expected[partition], (plan, partition)
            checkpoints = LocalCheckpoints(live, changelog, partition)
            assert [c.offset for c in checkpoints.newest_first()] == [last[partition]], plan
        assert not list((tmp_path / plan).glob(".snapshot-staging-*")), plan


def test_the_container_spark_engine_starts_from_the_newest_snapshot(
    tmp_path, broker, spark, topic_name, monkeypatch
):
    """``stores.counts.restore.engine=spark`` in a container (the hook ``run_loop`` calls before
    its tasks restore): a partition with a snapshot reads only the changelog after it, as the
    bulk restore does; the stores equal the sequential restore's up to the checkpoint."""
    changelog, props = idle_job(broker, f"hook-snap-{abs(hash(topic_name)) % 10**8}")
    props["stores.counts.backup.factories"] = "kafka,blobstore"
    props["stores.counts.restore.engine"] = "spark"
    props["blob.store.uri"] = f"file://{tmp_path / 'blobs'}"
    props["job.logged.store.base.dir"] = str(tmp_path / "state")
    job = parse_job_config(load_config(write_config(tmp_path / "job.properties", props)))
    first = produce_changes(broker, changelog, 4_000, seed=41)
    snapshot_at(job, changelog, 0, first[0], tmp_path / "snap", broker)
    last = produce_changes(broker, changelog, 2_000, seed=42)  # overwrites and tombstones
    write_checkpoints(broker, job.checkpoint_topic, "counts", last)
    expected = {p: sequential_restore(job, tmp_path / "seq", p, last[p], broker) for p in range(PARTITIONS)}
    produce_changes(broker, changelog, 500, seed=43)  # an uncommitted tail: not restored
    monkeypatch.setattr(bulk, "CONTAINER_BACKLOG_THRESHOLD", 1)  # every partition by Spark

    stats = restore_for_container(
        job, list(range(PARTITIONS)), read_checkpoints(broker, job.checkpoint_topic)
    )

    assert stats is not None
    by_partition = {s.partition: s for s in stats.partitions}
    assert by_partition[0].records == last[0] - first[0]  # the snapshot, then only what follows
    for partition in (1, 2, 3):  # no snapshot: the changelog up to the checkpoint
        assert by_partition[partition].records == last[partition] + 1
    for partition in range(PARTITIONS):
        live = tmp_path / "state" / "counts" / f"Partition_{partition}"
        assert store_items(live) == expected[partition], partition
        checkpoints = LocalCheckpoints(live, changelog, partition)
        assert [c.offset for c in checkpoints.newest_first()] == [last[partition]]
    assert not list((tmp_path / "state").glob(".snapshot-staging-*"))

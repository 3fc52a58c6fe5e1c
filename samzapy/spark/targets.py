"""What the Spark jobs that write stores share.

The store partitions to write (:class:`Target`, from the changelogs and the job's checkpoint:
:func:`changelog_targets`; started from the newest usable snapshot in the job's blob store:
:func:`from_snapshots`), the rows executors send back about the ranges and SST files they wrote
(:data:`RESULT_SCHEMA`), and the ingest of those files into the stores on the driver
(:func:`ingest`). Used by the bulk restore (:mod:`samzapy.spark.restore`) and by state as data
(:mod:`samzapy.spark.state_data`: reading up to the checkpoint, writing stores from rows).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samzapy.checkpoint import ChangelogFence
from samzapy.config import JobConfig
from samzapy.config.model import StoreConfig
from samzapy.spark import SparkJobError
from samzapy.spark.sst import SstFile, ingest_store, write_collected

log = logging.getLogger(__name__)

RESULT_SCHEMA = (
    "kind STRING, store STRING, partition INT, ord BIGINT, path STRING, entries BIGINT, "
    "records BIGINT, bytes BIGINT, first_offset BIGINT, last_offset BIGINT, chunk INT, data BINARY"
)


@dataclass(frozen=True)
class PartitionStats:
    """What the bulk restore did for one store partition."""

    store: str
    partition: int
    offset: int | None  # last changelog offset reflected (the OFFSET file); None: nothing read
    records: int
    bytes: int
    sst_entries: int  # entries written to SST files (= keys unless ranges were split)
    sst_files: int
    path: Path


@dataclass(frozen=True)
class Target:
    """One store partition to write, and its changelog range.

    With a ``base`` (a snapshot downloaded from the blob store: a RocksDB checkpoint at
    changelog offset ``start - 1``) the store starts as the base and the range, from ``start``,
    is written over it, deletions (tombstones) included.
    """

    store: StoreConfig
    partition: int
    stop: int | None  # exclusive; None: true end
    fence: ChangelogFence | None = None  # the checkpoint's: a zombie's records are left out
    start: int | None = None  # first offset to read; None: the changelog's beginning
    base: Path | None = None  # the snapshot the store starts from (its offset is start - 1)

    def fence_row(self) -> tuple[int, int]:
        """The fence as plain numbers for a Spark row.

        A pair (start, generation): -1 for "no start", generation 0 for "no fence" (a fence of
        generation 0 skips nothing).
        """
        if self.fence is None:
            return -1, 0
        return (-1 if self.fence.start is None else self.fence.start), self.fence.generation


def changelog_targets(
    job: JobConfig,
    stores: list[StoreConfig],
    partitions: list[int] | None,
    to_checkpoint: bool,
    servers: str,
) -> list[Target]:
    """Every partition (or ``partitions``) of ``stores``' changelogs as a target.

    With ``to_checkpoint``, stopped at the job's checkpoint and fenced by it (a zombie's records
    are left out).

    Raises:
        SparkJobError: a store's changelog topic does not exist.
    """
    from samzapy.kafka.admin import TopicAdmin

    checkpoints: dict[str, Any] = {}
    if to_checkpoint:
        from samzapy.checkpoint import read_checkpoints

        checkpoints = read_checkpoints(servers, job.checkpoint_topic)
    targets = []
    with TopicAdmin(servers) as admin:
        for store in stores:
            assert store.changelog is not None
            count = admin.partition_count(store.changelog.stream)
            if count is None:
                msg = f"changelog topic '{store.changelog.stream}' of store '{store.name}' does not exist"
                raise SparkJobError(msg)
            for partition in range(count) if partitions is None else partitions:
                stop = fence = None
                if to_checkpoint:
                    checkpoint = checkpoints.get(f"Partition {partition}")
                    k = checkpoint.changelog_offsets.get(store.name) if checkpoint else None
                    stop = 0 if k is None else k + 1
                    fence = checkpoint.fence_for(store.name) if checkpoint else None
                targets.append(Target(store, partition, stop, fence))
    return targets


def from_snapshots(job: JobConfig, targets: list[Target], servers: str, work_dir: Path) -> list[Target]:
    """``targets`` started from the newest usable snapshot of their store (module docstring).

    For every target whose store restores from snapshots (``stores.<store>.restore.factories``,
    or its backup factories, naming ``blobstore``), the newest snapshot usable for the target's
    last offset (the checkpoint's with ``to_checkpoint``, else the changelog's end; its fence
    too) is downloaded under ``work_dir`` and checked, file by file, as the job's own restore
    does (:class:`samzapy.stores.snapshot_restore.SnapshotSource`: a damaged one is skipped for
    the previous one); the target then reads only the changelog after it. Targets without a
    usable snapshot, and every target when the job has no blob store, are returned as they are.
    """
    from samzapy.kafka.offsets import end_offsets
    from samzapy.kafka.reading import reader_consumer
    from samzapy.records import TopicPartition
    from samzapy.stores.checkpoints import LocalCheckpoints
    from samzapy.stores.snapshot_index import SnapshotLayout, job_label
    from samzapy.stores.snapshot_restore import SnapshotSource
    from samzapy.stores.snapshots import job_blob_store

    wanted = [
        i
        for i, t in enumerate(targets)
        if t.store.restores_from_snapshots and t.stop != 0 and t.store.changelog is not None
    ]
    blob = job_blob_store(job) if wanted else None
    if blob is None:
        return targets
    tps = {i: TopicPartition(_topic(targets[i]), targets[i].partition) for i in wanted}
    consumer = reader_consumer(servers)
    try:
        ends = end_offsets(consumer, list(tps.values()))
    finally:
        consumer.close()
    label = job_label(job.job_name, job.job_id)
    started = list(targets)
    for i, tp in tps.items():
        target, end = targets[i], ends[tp]
        last = end - 1 if target.stop is None else target.stop - 1
        local = work_dir / target.store.name / f"Partition_{target.partition}"
        checkpoints = LocalCheckpoints(local, tp.topic, tp.partition)
        source = SnapshotSource(blob, SnapshotLayout(label, target.store.name, target.partition))
        offset = source.fetch(checkpoints, last, target.fence, end)
        if offset is not None:
            base = checkpoints.root / str(offset)
            started[i] = dataclasses.replace(target, start=offset + 1, base=base)
    return started


def _topic(target: Target) -> str:
    assert target.store.changelog is not None
    return target.store.changelog.stream


def result_schema() -> Any:
    """:data:`RESULT_SCHEMA` as a pyarrow schema (for ``mapInArrow`` batches)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("kind", pa.string()),
            ("store", pa.string()),
            ("partition", pa.int32()),
            ("ord", pa.int64()),
            ("path", pa.string()),
            ("entries", pa.int64()),
            ("records", pa.int64()),
            ("bytes", pa.int64()),
            ("first_offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("chunk", pa.int32()),
            ("data", pa.binary()),
        ]
    )


def ingest(
    targets: list[Target], rows: list[Any], target_dir: Path, handoff: str, staging: Path
) -> list[PartitionStats]:
    """Ingest the SST files the executors' ``rows`` name into each target's store under ``target_dir``.

    Files sent back through the driver with ``handoff='collect'`` are placed under ``staging``
    first. Returns what was written, per target.
    """
    rows = [r.asDict() if hasattr(r, "asDict") else r for r in rows]
    placed = (
        write_collected([r for r in rows if r["kind"] == "file"], staging) if handoff == "collect" else {}
    )
    result = []
    for target in targets:
        name, partition = target.store.name, target.partition
        ranges = [
            r for r in rows if r["kind"] == "range" and (r["store"], r["partition"]) == (name, partition)
        ]
        files = {
            r["path"]: SstFile(name, partition, r["ord"], placed.get(r["path"], r["path"]), r["entries"])
            for r in rows
            if r["kind"] == "file" and (r["store"], r["partition"]) == (name, partition)
        }
        offset = max((r["last_offset"] for r in ranges), default=None)
        if target.start is not None:  # from a snapshot: at least its offset
            offset = max(target.start - 1, offset if offset is not None else -1)
        path = ingest_store(target.store, target_dir, partition, files.values(), offset, base=target.base)
        result.append(
            PartitionStats(
                name,
                partition,
                offset,
                sum(r["records"] for r in ranges),
                sum(r["bytes"] for r in ranges),
                sum(f.entries for f in files.values()),
                len(files),
                path,
            )
        )
    return result

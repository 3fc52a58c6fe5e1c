"""``state-storage-tool restore``: rebuild a job's logged stores from their changelogs.

Into a directory, in the job's own layout, so that a job started on it replays only the tail.

Each store partition is built with :func:`samzapy.stores.factory.build_store` under
``<path>/<store>/Partition_<N>`` and restored with the job's own
:meth:`~samzapy.stores.engine.StorageEngine.restore`; then a local checkpoint (RocksDB
checkpoint + ``OFFSET`` file, :mod:`samzapy.stores.checkpoints`) is taken at the offset
restored to. A job whose Kafka checkpoint names that offset (or a later one) starts from this
local checkpoint and replays only the changelog records after it.

Two targets:

* **the changelog's end** (default): every record up to the true end (found past the dev
  broker's undercounting end offset). Read-only: the end is pinned before the restore starts,
  so nothing is trimmed and the changelog is never written, even while the job runs.
* **the job's checkpoint** (``to_checkpoint=True``): the changelog offset of each task's
  checkpoint, then the records after it are undone *in the changelog* (the trim of
  transactional state), exactly as the job does on start. This writes to the changelog: the
  job must be stopped.

A directory that already holds a restored store is brought forward incrementally: its
newest local checkpoint is the base and only the records after it are read. A store that
restores from snapshots (``stores.<store>.restore.factories`` naming ``blobstore``) starts from
the newest usable snapshot in the job's blob store when it is newer than that base
(``stores/snapshot_restore.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samzapy.checkpoint import TaskCheckpoint, read_checkpoints
from samzapy.config import StoreConfig
from samzapy.errors import SamzapyError, StoreLockedError
from samzapy.kafka.producer import Producer
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.ondisk.locks import locked_stores
from samzapy.progress import NoProgress, Progress
from samzapy.serdes import SerdeResolver
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store, store_dir
from samzapy.stores.snapshots import JobSnapshots
from samzapy.streams import task_name_for
from samzapy.tools.common import (
    BadInputError,
    JobSetup,
    ToolChangelog,
    ToolError,
    changelog_partitions,
    select_stores,
)

if TYPE_CHECKING:
    from samzapy.checkpoint import ChangelogFence
    from samzapy.stores.snapshot_restore import SnapshotSource

log = logging.getLogger(__name__)

ENGINES = ("sequential", "spark")
#: How long to wait for a store directory locked by another process before giving up.
LOCK_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class PartitionRestore:
    """What the restore of one store partition did."""

    store: str
    partition: int
    path: Path
    offset: int | None  # the changelog offset the store reflects now (None: empty changelog)
    base_offset: int | None  # the local checkpoint it started from (None: from scratch)
    records: int
    bytes: int
    trimmed: int
    seconds: float


@dataclass
class RestoreReport:
    """Every partition restored, and the totals."""

    path: Path
    to_checkpoint: bool
    partitions: list[PartitionRestore] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def records(self) -> int:
        """Changelog records replayed in all."""
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        """Changelog bytes (keys + values) replayed in all."""
        return sum(p.bytes for p in self.partitions)

    @property
    def rate(self) -> float:
        """Records replayed per second of the whole run."""
        return self.records / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class _Target:
    store: StoreConfig
    partition: int
    offset: int | None  # restore to this changelog offset (inclusive)
    end: int  # the changelog's true end when planned
    fence: ChangelogFence | None = None  # a zombie's records are skipped


def restore_stores(
    setup: JobSetup,
    path: Path,
    *,
    stores: Sequence[str] = (),
    partitions: Sequence[int] = (),
    to_checkpoint: bool = False,
    progress: Progress | None = None,
) -> RestoreReport:
    """Restore the logged RocksDB stores of ``setup`` into ``path`` (module doc).

    Args:
        setup: the job (:func:`samzapy.tools.common.load_job`).
        path: the base directory (what ``job.logged.store.base.dir`` would name).
        stores: store names (default: every logged RocksDB store).
        partitions: changelog partitions = tasks (default: all).
        to_checkpoint: restore to each task's checkpointed changelog offset and trim, as the
            job does; writes to the changelog, the job must be stopped.
        progress: where progress goes (default: nowhere).

    Raises:
        BadInputError: unknown store, store without changelog, partition out of range.
        ToolError: the job looks alive (``to_checkpoint``), a store directory is locked by
            another process, or the restore failed.
    """
    progress = progress or NoProgress()
    started = time.monotonic()
    chosen = select_stores(setup, stores, logged_only=True)
    servers = setup.bootstrap_servers()
    if to_checkpoint:
        _refuse_if_job_alive(setup, chosen)
    # None: the changelogs are opened read-only (a send would raise ChangelogWriteRefused)
    producer = Producer(servers) if to_checkpoint else None
    report = RestoreReport(path, to_checkpoint)
    try:
        checkpoints = read_checkpoints(servers, setup.job.checkpoint_topic) if to_checkpoint else {}
        targets = _plan(servers, chosen, partitions, checkpoints, to_checkpoint)
        progress.begin(sum(t.end for t in targets))
        serdes = SerdeResolver(setup.job)
        # stores with stores.<store>.restore.factories naming blobstore start from a snapshot
        snapshots = JobSnapshots.for_job(setup.job, MetricsGroup("state-storage-tool"), upload=False)
        for target in targets:
            source = None if snapshots is None else snapshots.source(target.store, target.partition, None)
            report.partitions.append(_restore_one(target, path, servers, producer, serdes, progress, source))
        if producer is not None:
            producer.flush()  # trim writes acknowledged before we say "done"
    finally:
        if producer is not None:
            producer.close()
        progress.finish()
    report.seconds = time.monotonic() - started
    return report


def _refuse_if_job_alive(setup: JobSetup, stores: list[StoreConfig]) -> None:
    busy = locked_stores(setup.job.logged_store_base_dir, [s.name for s in stores])
    if busy:
        msg = (
            f"the job looks alive: its store directory {busy[0]} is locked by a running process. "
            "--to-checkpoint trims the changelog as the job does on start: stop the job first"
        )
        raise ToolError(msg)


def _plan(
    servers: str,
    stores: list[StoreConfig],
    partitions: Sequence[int],
    checkpoints: dict[str, TaskCheckpoint],
    to_checkpoint: bool,
) -> list[_Target]:
    targets = []
    for store in stores:
        assert store.changelog is not None
        for partition in changelog_partitions(servers, store, partitions):
            changelog = ToolChangelog(store.changelog.stream, partition, None, servers)
            try:
                end = changelog.end_offset()
            finally:
                changelog.close_reader()
            fence = None
            if to_checkpoint:
                checkpoint = checkpoints.get(task_name_for(partition))
                offset = checkpoint.changelog_offsets.get(store.name) if checkpoint else None
                fence = checkpoint.fence_for(store.name) if checkpoint else None
            else:
                offset = end - 1 if end > 0 else None
            targets.append(_Target(store, partition, offset, end, fence))
    return targets


def _restore_one(
    target: _Target,
    path: Path,
    servers: str,
    producer: Producer | None,
    serdes: SerdeResolver,
    progress: Progress,
    snapshots: SnapshotSource | None = None,
) -> PartitionRestore:
    store = target.store
    assert store.changelog is not None
    started = time.monotonic()
    changelog = ToolChangelog(store.changelog.stream, target.partition, producer, servers, progress.add)
    if producer is None:
        changelog.pin_end(target.end)  # read-only: the restore can never reach a trim
    engine = _build(store, target.partition, path, changelog, serdes)
    try:
        stats = engine.restore(target.offset, fence=target.fence, snapshots=snapshots)
        if target.offset is not None:
            engine.checkpoint(target.offset)  # the local checkpoint + OFFSET the job trusts
    except SamzapyError as exc:
        msg = f"restore of store '{store.name}' partition {target.partition} failed: {exc}"
        raise ToolError(msg) from exc
    finally:
        engine.close()
    progress.skip(max(target.end - changelog.records_read, 0))
    log.info(
        "store %s partition %d: restored to changelog offset %s (%d records, %d trimmed)",
        store.name,
        target.partition,
        target.offset,
        stats.restored_messages,
        stats.trimmed_messages,
    )
    return PartitionRestore(
        store.name,
        target.partition,
        store_dir(path, store.name, target.partition),
        target.offset,
        stats.base_offset,
        stats.restored_messages,
        stats.restored_bytes,
        stats.trimmed_messages,
        time.monotonic() - started,
    )


def _build(
    store: StoreConfig, partition: int, path: Path, changelog: ToolChangelog, serdes: SerdeResolver
) -> StorageEngine[Any, Any]:
    key_serde, msg_serde = serdes.for_store(store)
    metrics = MetricsRegistry().group(f"store.{store.name}.{task_name_for(partition)}")
    try:
        return build_store(
            store,
            partition=partition,
            base_dir=path,
            key_serde=key_serde,
            msg_serde=msg_serde,
            changelog=changelog,
            metrics=metrics,
            lock_timeout_s=LOCK_TIMEOUT_S,
        )
    except StoreLockedError as exc:
        msg = (
            f"{store_dir(path, store.name, partition)} is in use by another process (a running job?): "
            "restore into another --path, or stop that process"
        )
        raise ToolError(msg) from exc


def restore_with_engine(engine: str, setup: JobSetup, path: Path, **options: Any) -> RestoreReport | Any:
    """Dispatch to the restore engine: ``sequential`` (:func:`restore_stores`) or ``spark``.

    ``spark`` calls ``samzapy.spark.restore.bulk.restore_stores(config, path, stores=...,
    partitions=..., to_checkpoint=...)`` (the Spark issue) and returns what it returns; it
    reports no progress of its own here.

    Raises:
        BadInputError: unknown engine, or ``spark`` while the Spark engine is not there.
        ToolError: the Spark engine is there but cannot be imported (pyspark missing...).
    """
    if engine == "sequential":
        return restore_stores(setup, path, **options)
    if engine != "spark":
        msg = f"unknown restore engine '{engine}': use one of {', '.join(ENGINES)}"
        raise BadInputError(msg)
    try:
        from samzapy.spark.restore import bulk
    except ModuleNotFoundError as exc:
        if exc.name not in ("samzapy.spark", "samzapy.spark.restore", "samzapy.spark.restore.bulk"):
            msg = f"--engine spark cannot start: {exc}. Install the extra: pip install 'samzapy[spark]'"
            raise ToolError(msg) from exc
        msg = (
            "--engine spark is not available yet: the Spark engine arrives with the Spark issue. "
            "Use --engine sequential"
        )
        raise BadInputError(msg) from None
    except ImportError as exc:
        msg = f"--engine spark cannot start: {exc}"
        raise ToolError(msg) from exc
    return bulk.restore_stores(
        setup.config,
        path,
        stores=list(options.get("stores", ())) or None,
        partitions=list(options.get("partitions", ())) or None,
        to_checkpoint=options.get("to_checkpoint", False),
    )

"""A job's snapshots, wired: its blob store, the uploader the commit feeds, restore sources.

:class:`JobSnapshots` is what the container holds when some store backs up to or restores
from ``blobstore`` (``stores.<store>.backup.factories``; docs/operations.md, Snapshots). The
commit calls :meth:`JobSnapshots.stamp` on each task checkpoint it writes (naming the newest
complete snapshot of each store) and :meth:`JobSnapshots.after_commit` once the checkpoints
are acknowledged (queueing the local checkpoints just taken for upload); the task builder asks
:meth:`JobSnapshots.source` for the restore of each store.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from samzapy.config.model import JobConfig, StoreConfig
from samzapy.metrics import MetricsGroup
from samzapy.stores.blob_store import BlobStore, open_blob_store
from samzapy.stores.snapshot_index import SnapshotLayout, job_label
from samzapy.stores.snapshot_restore import SnapshotSource
from samzapy.stores.snapshot_upload import SnapshotMeta, SnapshotSettings, SnapshotUploader

log = logging.getLogger(__name__)

__all__ = ["JobSnapshots", "job_blob_store", "snapshot_settings"]


def snapshot_settings(job: JobConfig) -> SnapshotSettings:
    """The ``blob.store.*`` knobs of ``job``."""
    return SnapshotSettings(
        keep=job.snapshot_retention,
        grace_s=job.snapshot_grace_ms / 1000,
        max_pending=job.snapshot_max_pending,
        max_wait_s=job.snapshot_max_wait_ms / 1000,
    )


def job_blob_store(job: JobConfig) -> BlobStore | None:
    """The blob store ``blob.store.uri`` names (``None``: unset)."""
    if job.blob_store_uri is None:
        return None
    return open_blob_store(
        job.blob_store_uri, endpoint=job.blob_store_s3_endpoint, region=job.blob_store_s3_region
    )


class JobSnapshots:
    """The snapshots of one container's tasks (module docstring).

    Args:
        job: the job; its stores' ``backs_up_snapshots`` / ``restores_from_snapshots`` choose.
        blob: the blob store.
        metrics: the container's group (the uploader's counters).
        upload: whether to start the uploader (the tools only restore: no).
    """

    def __init__(
        self, job: JobConfig, blob: BlobStore, metrics: MetricsGroup, *, upload: bool = True
    ) -> None:
        self.job = job
        self.blob = blob
        self.label = job_label(job.job_name, job.job_id)
        self._backed_up = {s.name for s in job.stores.values() if s.backs_up_snapshots}
        self._carried: dict[tuple[str, str], str] = {}  # (task, store) -> named at restore
        self.uploader = (
            SnapshotUploader(blob, self.label, snapshot_settings(job), metrics)
            if self._backed_up and upload
            else None
        )

    @classmethod
    def for_job(cls, job: JobConfig, metrics: MetricsGroup, *, upload: bool = True) -> JobSnapshots | None:
        """Snapshots for ``job``, or ``None`` when no store uses ``blobstore``.

        ``upload=False`` only restores (no uploader thread).
        """
        used = any(s.backs_up_snapshots or s.restores_from_snapshots for s in job.stores.values())
        blob = job_blob_store(job) if used else None
        if blob is None:
            return None
        # said once per container; restore-only users (standbys, tools) say it at debug level
        (log.info if upload else log.debug)("store snapshots in %s", blob.describe())
        return cls(job, blob, metrics, upload=upload)

    def source(self, store: StoreConfig, partition: int, checkpoint: Any) -> SnapshotSource | None:
        """Where a restore of ``store`` of task ``partition`` may find a base.

        ``None``: the store does not restore from snapshots. ``checkpoint``: the task's, or
        ``None``; the snapshot it names stays named by the task's checkpoints until a newer one
        is uploaded.
        """
        named = None if checkpoint is None else checkpoint.snapshots.get(store.name)
        if named is not None:
            self._carried[(checkpoint.task_name, store.name)] = named
        if not store.restores_from_snapshots:
            return None
        return SnapshotSource(self.blob, SnapshotLayout(self.label, store.name, partition), named)

    def stamp(self, checkpoint: Any) -> Any:
        """``checkpoint`` naming the newest complete snapshot of each of its task's stores."""
        if self.uploader is None:
            return checkpoint
        done = self.uploader.completed(checkpoint.task_name)
        task = checkpoint.task_name
        carried = {store: name for (t, store), name in self._carried.items() if t == task}
        merged = {**checkpoint.snapshots, **carried, **done}
        return (
            checkpoint
            if merged == checkpoint.snapshots
            else dataclasses.replace(checkpoint, snapshots=merged)
        )

    def after_commit(
        self, tasks: Iterable[Any], written: dict[str, Any], offsets: dict[str, dict[str, int | None]]
    ) -> None:
        """Queue the uploads of the local checkpoints this commit took.

        The acknowledged checkpoints are in ``written``, the changelog offsets in ``offsets``,
        both by task name.
        """
        if self.uploader is None:
            return
        for task in tasks:
            checkpoint = written.get(task.task_name)
            if checkpoint is None:
                continue
            for name in self._backed_up:
                engine = task.stores.get(name)
                offset = offsets.get(task.task_name, {}).get(name)
                changelog = getattr(engine, "changelog", None)
                if offset is None or engine is None or engine.store_dir is None or changelog is None:
                    continue
                fence = checkpoint.fence_for(name)
                meta = SnapshotMeta(
                    task=task.task_name,
                    store=name,
                    changelog_topic=changelog.topic,
                    changelog_partition=changelog.partition,
                    changelog_offset=offset,
                    generation=checkpoint.generation,
                    fence_generation=0 if fence is None else fence.generation,
                    input_offsets={str(ssp): o for ssp, o in checkpoint.input_offsets.items()},
                )
                self.uploader.enqueue(task.task_name, name, engine, meta)

    def close(self, wait_s: float = 30.0) -> None:
        """Finish queued uploads for up to ``wait_s`` seconds, then stop the uploader."""
        if self.uploader is not None:
            self.uploader.close(wait_s)

"""Uploading store snapshots after commits, incrementally, off the commit path; retention.

**Upload** (:func:`upload_snapshot`): the files of a local RocksDB checkpoint taken at a
commit (hard links, ``stores/checkpoints.py``) are sent to the blob store, except those a
snapshot in the blob store holds already (same SHA-256: SST files are immutable, so only the
files written since the last snapshot, plus the small MANIFEST, go up); then the index
(``stores/snapshot_index.py``), last. A process killed before the index is written leaves
only files no index names: no snapshot, and retention removes them.

**Off the commit path** (:class:`SnapshotUploader`): the commit only hard-links the
checkpoint's files into a staging directory and queues them; one background thread uploads.
A newer commit's snapshot of the same store replaces one still queued (it is newer and
covers the same data), so a slow or absent blob store lets snapshots fall behind (the
``snapshot-lag-records`` gauge says how far) but never makes the queue grow past one entry
per store, and never stops processing: the changelog still holds everything since the last
snapshot. A commit waits only when more than ``max_pending`` snapshots are queued, and at
most ``max_wait_s``; then the oldest queued one is dropped.

**Retention** after each upload: ``stores/snapshot_retention.py``, whose rule (an existing
blob is referenced only if unmarked at the uploader's listing, and a snapshot whose upload took
longer than half the grace period is not published) the upload keeps.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samzapy.crashpoints import crash_point
from samzapy.metrics import MetricsGroup
from samzapy.stores.blob_store import BlobStore, BlobStoreError
from samzapy.stores.checkpoints import OFFSET_FILE
from samzapy.stores.paths import checkpoints_dir, snapshot_staging_dir
from samzapy.stores.snapshot_index import (
    SnapshotFile,
    SnapshotIndex,
    SnapshotLayout,
    TaskSnapshots,
    file_sha256,
)
from samzapy.stores.snapshot_retention import sweep

log = logging.getLogger(__name__)

__all__ = [
    "SnapshotMeta",
    "SnapshotSettings",
    "SnapshotUploader",
    "UploadResult",
    "upload_snapshot",
]

#: Files of a RocksDB checkpoint a snapshot leaves out: the OFFSET file (written anew by the
#: restore) and RocksDB's own info logs.
_SKIPPED = (OFFSET_FILE, "LOCK")


def _snapshot_files(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.name not in _SKIPPED and not p.name.startswith("LOG")
    )


@dataclass(frozen=True)
class SnapshotSettings:
    """The knobs of snapshots (``blob.store.*``; docs/operations.md, Snapshots)."""

    keep: int = 3  # snapshots kept per task and store
    grace_s: float = 3600.0  # an unreferenced file blob lives this long before it is deleted
    max_pending: int = 16  # queued snapshots before a commit waits
    max_wait_s: float = 10.0  # the longest a commit waits for the queue


@dataclass(frozen=True)
class SnapshotMeta:
    """What a snapshot's index says besides its files: whose state, and which commit."""

    task: str
    store: str
    changelog_topic: str
    changelog_partition: int
    changelog_offset: int
    generation: int
    fence_generation: int = 0
    input_offsets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class UploadResult:
    """What one upload did: the index written, the files sent and referenced again."""

    index: SnapshotIndex
    files_uploaded: int
    files_reused: int
    bytes_uploaded: int


class _Hashes:
    """SHA-256 of files, remembered by (name, size, inode, mtime).

    The SST files of consecutive checkpoints are hard links of one file, so each is read once.
    Only the files of the last snapshot of each store are remembered (:meth:`keep_only`), so
    memory stays bounded.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int, int], str] = {}

    @staticmethod
    def key(path: Path) -> tuple[str, int, int, int]:
        stat = path.stat()
        return path.name, stat.st_size, stat.st_ino, stat.st_mtime_ns

    def of(self, path: Path) -> tuple[str, int]:
        key = self.key(path)
        sha = self._known.get(key)
        if sha is None:
            sha = self._known[key] = file_sha256(path)
        return sha, key[1]

    def keep_only(self, paths: list[Path]) -> None:
        """Forget every file but ``paths`` (those of a store's newest snapshot)."""
        wanted = {self.key(p) for p in paths}
        self._known = {k: v for k, v in self._known.items() if k in wanted}


def upload_snapshot(
    blob: BlobStore,
    layout: SnapshotLayout,
    directory: Path,
    meta: SnapshotMeta,
    *,
    grace_s: float = SnapshotSettings.grace_s,
    clock: Callable[[], float] = time.time,
    hashes: _Hashes | None = None,
    cache: dict[str, SnapshotIndex] | None = None,
) -> UploadResult | None:
    """Upload the RocksDB checkpoint in ``directory`` as a snapshot (module docstring).

    Returns ``None`` when the upload took longer than ``grace_s / 2`` (no index is written:
    a blob it reuses may be deleted by then).

    Raises:
        BlobStoreError: the blob store failed; no index was written.
    """
    started = clock()
    view = TaskSnapshots(blob, layout, cache)
    known: dict[str, str] = {}  # sha256 -> key of an unmarked blob a readable index names
    for index in view.readable_indexes():
        for f in index.files:
            if f.key in view.files and f.key not in view.marked and view.files[f.key].size == f.size:
                known.setdefault(f.sha256, f.key)
    hashes = hashes or _Hashes()
    upload_id = uuid.uuid4().hex[:12]
    files: list[SnapshotFile] = []
    uploaded = uploaded_bytes = reused = 0
    paths = _snapshot_files(directory)
    for path in paths:
        sha, size = hashes.of(path)
        key = known.get(sha)
        if key is None:
            key = known[sha] = layout.file_key(sha, upload_id)
            blob.put_file(layout.full(key), path)
            uploaded += 1
            uploaded_bytes += size
            crash_point("during-snapshot-upload")
        else:
            reused += 1
        files.append(SnapshotFile(path.name, key, size, sha))
    hashes.keep_only(paths)
    if clock() - started > grace_s / 2:
        log.warning(
            "snapshot of %s/%s at changelog offset %d took %.0f s, over half the grace period "
            "(%.0f s): not published (its reused files may be deleted by now); the next one is tried",
            meta.task,
            meta.store,
            meta.changelog_offset,
            clock() - started,
            grace_s,
        )
        return None
    index = SnapshotIndex(
        task=meta.task,
        store=meta.store,
        changelog_topic=meta.changelog_topic,
        changelog_partition=meta.changelog_partition,
        changelog_offset=meta.changelog_offset,
        generation=meta.generation,
        fence_generation=meta.fence_generation,
        input_offsets=dict(meta.input_offsets),
        files=tuple(files),
        created_ms=int(time.time() * 1000),
        upload_id=upload_id,
    )
    blob.put_bytes(layout.index_key(index.name), index.to_bytes())  # last: the snapshot exists now
    return UploadResult(index, uploaded, reused, uploaded_bytes)


@dataclass
class _Job:
    task: str
    store: str
    layout: SnapshotLayout
    staging: Path
    meta: SnapshotMeta


class SnapshotUploader:
    """Uploads the snapshots commits queue, one at a time, in a background thread.

    The commit calls :meth:`enqueue` after its checkpoint is acknowledged, and stamps each
    task's checkpoint with :meth:`completed` (the newest complete snapshot of each store).
    Failures are logged and counted; the snapshot stays queued (unless a newer one replaces it)
    and is tried again after a backoff.

    Metrics (the container's group): ``snapshots-uploaded``, ``snapshot-files-uploaded``,
    ``snapshot-files-reused``, ``snapshot-bytes-uploaded``, ``snapshot-upload-failures``,
    ``snapshots-superseded``, ``snapshot-upload-ns``; per store (its own group):
    ``snapshot-lag-records``, the changelog records committed since its newest complete snapshot.

    Thread-safe: the commit's thread queues, the uploader's thread uploads.
    """

    def __init__(
        self,
        blob: BlobStore,
        job_label: str,
        settings: SnapshotSettings,
        metrics: MetricsGroup,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.blob = blob
        self.job_label = job_label
        self.settings = settings
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: OrderedDict[tuple[str, str], _Job] = OrderedDict()
        self._busy: _Job | None = None
        self._completed: dict[tuple[str, str], SnapshotIndex] = {}
        self._committed: dict[tuple[str, str], int] = {}  # the newest committed changelog offset
        self._queued: dict[tuple[str, str], int] = {}  # the newest offset queued
        self._cache: dict[str, SnapshotIndex] = {}
        self._hashes: dict[tuple[str, str], _Hashes] = {}  # per (task, store)
        self._closed = False
        counter = metrics.counter
        self.uploaded = counter("snapshots-uploaded")
        self.files_uploaded = counter("snapshot-files-uploaded")
        self.files_reused = counter("snapshot-files-reused")
        self.bytes_uploaded = counter("snapshot-bytes-uploaded")
        self.failures = counter("snapshot-upload-failures")
        self.superseded = counter("snapshots-superseded")
        self._ns = counter("snapshot-upload-ns")
        self._thread = threading.Thread(target=self._run, name="snapshot-uploader", daemon=True)
        self._thread.start()

    # -- the commit's side -----------------------------------------------------------------

    def completed(self, task: str) -> dict[str, str]:
        """The newest complete snapshot (its index name) of each store of ``task``."""
        with self._cond:
            return {store: index.name for (t, store), index in self._completed.items() if t == task}

    def enqueue(self, task: str, store: str, engine: Any, meta: SnapshotMeta) -> bool:
        """Queue the local checkpoint ``engine`` took at ``meta.changelog_offset`` for upload.

        The checkpoint is staged as hard links now, so that the checkpoint's pruning cannot take
        its files away. Returns whether it was queued (no checkpoint at that offset, or that
        offset queued already: no).
        """
        key = (task, store)
        self._track_lag(key, engine, meta.changelog_offset)
        source = checkpoints_dir(engine.store_dir) / str(meta.changelog_offset)
        if self._queued.get(key, -1) >= meta.changelog_offset or not source.is_dir():
            return False
        staging_root = snapshot_staging_dir(engine.store_dir)
        staging = staging_root / f"{meta.changelog_offset}-{uuid.uuid4().hex[:8]}"
        self._clear_stale(staging_root)
        staging.mkdir(parents=True)
        for path in _snapshot_files(source):
            os.link(path, staging / path.name)
        layout = SnapshotLayout(self.job_label, store, engine.partition)
        job = _Job(task, store, layout, staging, meta)
        with self._cond:
            self._queued[key] = meta.changelog_offset
            replaced = self._pending.pop(key, None)
            if replaced is not None:
                self.superseded.inc()
                shutil.rmtree(replaced.staging, ignore_errors=True)
            elif len(self._pending) >= self.settings.max_pending:
                self._cond.wait_for(
                    lambda: len(self._pending) < self.settings.max_pending, self.settings.max_wait_s
                )
                if len(self._pending) >= self.settings.max_pending:
                    _, dropped = self._pending.popitem(last=False)
                    self.superseded.inc()
                    shutil.rmtree(dropped.staging, ignore_errors=True)
            self._pending[key] = job
            self._cond.notify_all()
        return True

    def _track_lag(self, key: tuple[str, str], engine: Any, offset: int) -> None:
        with self._cond:
            first = key not in self._committed
            self._committed[key] = offset
        if first:
            engine.metrics.gauge("snapshot-lag-records", lambda: self.lag(key))

    def lag(self, key: tuple[str, str]) -> int:
        """Changelog records committed since the newest complete snapshot of (task, store)."""
        with self._cond:
            committed = self._committed.get(key, -1)
            done = self._completed.get(key)
        return committed - (done.changelog_offset if done is not None else -1)

    def _clear_stale(self, staging_root: Path) -> None:
        """Remove staging directories of this store no queued snapshot uses (left by a kill)."""
        if not staging_root.is_dir():
            return
        with self._cond:
            live = {j.staging for j in self._pending.values()} | (
                {self._busy.staging} if self._busy else set()
            )
        for path in staging_root.iterdir():
            if path not in live:
                shutil.rmtree(path, ignore_errors=True)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or uploading; whether that happened in time."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and self._busy is None, timeout_s)

    def close(self, wait_s: float = 30.0) -> None:
        """Finish the queued snapshots for up to ``wait_s`` seconds, then stop.

        Stops waiting at the first failed upload: a blob store that is down must not hold up a
        shutdown (the changelog holds everything the snapshots lack).
        """
        deadline = time.monotonic() + wait_s
        failures = self.failures.value
        while time.monotonic() < deadline and self.failures.value == failures:
            if self.wait_idle(min(0.2, max(deadline - time.monotonic(), 0.0))):
                break
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)

    # -- the uploader's thread ---------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._pending))
                if self._closed:
                    return
                _, job = self._pending.popitem(last=False)
                self._busy = job
            try:
                ok = self._upload(job)
            except Exception:  # a bug must not end the thread: snapshots would stop for good
                self.failures.inc()
                log.exception("snapshot of %s/%s failed unexpectedly (tried again)", job.task, job.store)
                ok = False
            with self._cond:
                self._busy = None
                if ok:
                    shutil.rmtree(job.staging, ignore_errors=True)
                    backoff = 0.0
                elif (job.task, job.store) not in self._pending:
                    self._pending[(job.task, job.store)] = job  # tried again, unless replaced
                    self._pending.move_to_end((job.task, job.store), last=False)
                else:
                    shutil.rmtree(job.staging, ignore_errors=True)
                self._cond.notify_all()
                if not ok:
                    backoff = min(max(backoff * 2, 0.5), 30.0)
                    self._cond.wait_for(lambda: self._closed, backoff)

    def _upload(self, job: _Job) -> bool:
        started = time.perf_counter_ns()
        try:
            result = upload_snapshot(
                self.blob,
                job.layout,
                job.staging,
                job.meta,
                grace_s=self.settings.grace_s,
                clock=self._clock,
                hashes=self._hashes.setdefault((job.task, job.store), _Hashes()),
                cache=self._cache,
            )
        except (BlobStoreError, OSError) as exc:
            self.failures.inc()
            log.warning(
                "snapshot of %s/%s at changelog offset %d not uploaded to %s (tried again; the "
                "changelog still holds everything since the last snapshot): %s",
                job.task,
                job.store,
                job.meta.changelog_offset,
                self.blob.describe(),
                exc,
            )
            return False
        self._ns.inc(time.perf_counter_ns() - started)
        if result is None:
            self.failures.inc()
            return True  # given up: a newer commit brings the next one
        with self._cond:
            self._completed[(job.task, job.store)] = result.index
        self.uploaded.inc()
        self.files_uploaded.inc(result.files_uploaded)
        self.files_reused.inc(result.files_reused)
        self.bytes_uploaded.inc(result.bytes_uploaded)
        log.info(
            "snapshot %s of %s/%s uploaded to %s: %d files (%.1f MB) sent, %d referenced again",
            result.index.name,
            job.task,
            job.store,
            self.blob.describe(),
            result.files_uploaded,
            result.bytes_uploaded / 1e6,
            result.files_reused,
        )
        try:
            sweep(
                self.blob,
                job.layout,
                keep=self.settings.keep,
                grace_s=self.settings.grace_s,
                clock=self._clock,
                cache=self._cache,
            )
        except BlobStoreError as exc:
            log.warning(
                "retention of %s in %s failed (tried after the next upload): %s",
                job.layout.prefix,
                self.blob.describe(),
                exc,
            )
        return True

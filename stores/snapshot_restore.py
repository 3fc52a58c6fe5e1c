"""Restoring a store from a snapshot in a blob store; listing and verifying snapshots.

A task without a local checkpoint as new as the blob store's newest usable snapshot
downloads that snapshot into its local checkpoint directory (``Partition_N.checkpoints/<offset>``,
with an OFFSET file, exactly as a local checkpoint), checking every file's size and SHA-256 on
the way. The restore (``stores/restore.py``) then takes it as its base like any local
checkpoint (it also reads every block with RocksDB's checksums) and replays only the changelog
after it. A snapshot is *usable* for a restore to changelog offset ``K`` when it is of the
same changelog partition, at an offset ``<= K`` and below the changelog's end, and, when the
checkpoint carries a changelog fence, written by the fence's generation or later or at an
offset the fence takes whole (a zombie's snapshot after a takeover holds records the new owner
skips). A damaged snapshot (a file missing, of the wrong size or checksum) is skipped for the
previous one; without any, the restore replays the changelog, and a log line says which
snapshot was used, or why none.

The blob store failing never fails a restore: the changelog holds everything.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samzapy.stores.blob_store import BlobStore, BlobStoreError
from samzapy.stores.checkpoints import OFFSET_FILE, LocalCheckpoints
from samzapy.stores.paths import partition_of
from samzapy.stores.snapshot_index import SnapshotIndex, SnapshotLayout, TaskSnapshots, file_sha256

if TYPE_CHECKING:
    from samzapy.checkpoint import ChangelogFence

log = logging.getLogger(__name__)

__all__ = ["SnapshotSource", "snapshot_partitions", "unusable_reason", "verify_snapshot"]


def unusable_reason(
    index: SnapshotIndex, topic: str, partition: int, k: int, end: int, fence: ChangelogFence | None
) -> str | None:
    """Why ``index`` cannot be the base of a restore to changelog offset ``k`` (``None``: it can).

    >>> from samzapy.checkpoint import ChangelogFence
    >>> ix = SnapshotIndex("Partition 0", "s", "log", 0, 50, generation=1)
    >>> unusable_reason(ix, "log", 0, 60, 70, None) is None
    True
    >>> unusable_reason(ix, "log", 0, 40, 70, None)
    'at changelog offset 50, beyond the checkpointed 40'
    >>> unusable_reason(ix, "log", 0, 60, 70, ChangelogFence(start=45, generation=2))
    'written by generation 1 after generation 2 took the task over at offset 45'
    """
    if (index.changelog_topic, index.changelog_partition) != (topic, partition):
        return f"of changelog {index.changelog_topic}/{index.changelog_partition}, not {topic}/{partition}"
    if index.changelog_offset > k:
        return f"at changelog offset {index.changelog_offset}, beyond the checkpointed {k}"
    if index.changelog_offset >= end:
        return f"at changelog offset {index.changelog_offset}, beyond the changelog's end {end}"
    if fence is not None and index.generation < fence.generation:
        if fence.start is None or index.changelog_offset > fence.start:
            return (
                f"written by generation {index.generation} after generation {fence.generation} "
                f"took the task over at offset {fence.start}"
            )
    return None


def _download_verified(
    blob: BlobStore, layout: SnapshotLayout, index: SnapshotIndex, target: Path
) -> str | None:
    """Download every file of ``index`` into ``target`` and check it; the first problem, or ``None``."""
    for f in index.files:
        path = target / f.name
        try:
            blob.get_file(layout.full(f.key), path)
        except BlobStoreError as exc:
            return f"file {f.name} ({f.key}) cannot be read: {exc}"
        size = path.stat().st_size
        if size != f.size:
            return f"file {f.name} ({f.key}) has {size} bytes, the index says {f.size}"
        sha = file_sha256(path)
        if sha != f.sha256:
            return f"file {f.name} ({f.key}) has SHA-256 {sha[:16]}..., the index says {f.sha256[:16]}..."
    return None


@dataclass
class SnapshotSource:
    """The snapshots of one store of one task, as a restore sees them.

    Args:
        blob: the blob store.
        layout: where the task's snapshots of the store are.
        named: the snapshot the task's checkpoint names (its newest complete one when the
            checkpoint was written), for the log when it is missing.

    ``fetched`` is the index downloaded by the last :meth:`fetch` (``None``: none).
    """

    blob: BlobStore
    layout: SnapshotLayout
    named: str | None = None
    fetched: SnapshotIndex | None = None

    def fetch(
        self, checkpoints: LocalCheckpoints, k: int, fence: ChangelogFence | None, end: int
    ) -> int | None:
        """Download into ``checkpoints`` the newest usable snapshot newer than every usable local checkpoint.

        Returns its changelog offset, or ``None`` (the log says why).
        """
        self.fetched = None
        where = f"{self.blob.describe()}/{self.layout.prefix}"
        local = [c.offset for c in checkpoints.newest_first() if c.offset <= k and c.offset < end]
        try:
            view = TaskSnapshots(self.blob, self.layout)
            indexes = view.readable_indexes()
        except BlobStoreError as exc:
            log.warning("snapshots of %s not read (%s): restoring from %s", where, exc, self._fallback(local))
            return None
        if self.named is not None and self.named not in view.index_names:
            log.warning("the checkpoint names snapshot %s, which is not in %s (deleted?)", self.named, where)
        candidates = []
        for index in sorted(indexes, key=lambda i: (i.changelog_offset, i.generation), reverse=True):
            reason = unusable_reason(index, checkpoints.topic, checkpoints.partition, k, end, fence)
            if reason is None:
                candidates.append(index)
            else:
                log.info("snapshot %s of %s not usable for offset %d: %s", index.name, where, k, reason)
        for index in candidates:
            if local and local[0] >= index.changelog_offset:
                log.info(
                    "local checkpoint at changelog offset %d is as new as snapshot %s (offset %d): "
                    "not downloaded",
                    local[0],
                    index.name,
                    index.changelog_offset,
                )
                return None
            if self._fetch_one(checkpoints, index, where):
                return index.changelog_offset
        log.info(
            "no usable snapshot in %s (%d found, %d usable): restoring from %s",
            where,
            len(indexes),
            len(candidates),
            self._fallback(local),
        )
        return None

    @staticmethod
    def _fallback(local: list[int]) -> str:
        return f"local checkpoint {local[0]} and the changelog" if local else "the changelog alone"

    def _fetch_one(self, checkpoints: LocalCheckpoints, index: SnapshotIndex, where: str) -> bool:
        started = time.monotonic()
        checkpoints.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{index.changelog_offset}.", suffix=".tmp", dir=checkpoints.root))
        try:
            problem = _download_verified(self.blob, self.layout, index, tmp)
        except OSError as exc:
            problem = f"cannot be written locally: {exc}"
        if problem is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            log.warning(
                "snapshot %s of %s is damaged, not used (trying the previous one): %s",
                index.name,
                where,
                problem,
            )
            return False
        record = {
            "topic": checkpoints.topic,
            "partition": checkpoints.partition,
            "offset": index.changelog_offset,
        }
        with open(tmp / OFFSET_FILE, "w") as out:
            json.dump(record, out)
            out.flush()
            os.fsync(out.fileno())
        target = checkpoints.root / str(index.changelog_offset)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(tmp, target)
        elapsed = max(time.monotonic() - started, 1e-9)
        log.info(
            "snapshot %s of %s downloaded as the restore's base (changelog offset %d, generation %d): "
            "%d files, %.1f MB in %.1f s (%.1f MB/s), every checksum good",
            index.name,
            where,
            index.changelog_offset,
            index.generation,
            len(index.files),
            index.total_bytes / 1e6,
            elapsed,
            index.total_bytes / 1e6 / elapsed,
        )
        self.fetched = index
        return True


def verify_snapshot(blob: BlobStore, layout: SnapshotLayout, index: SnapshotIndex) -> str | None:
    """Download every file of ``index`` to a temporary directory and check sizes and checksums.

    Returns the first problem found, or ``None``.
    """
    with tempfile.TemporaryDirectory(prefix="samzapy-verify-") as tmp:
        return _download_verified(blob, layout, index, Path(tmp))


def snapshot_partitions(blob: BlobStore, job_label: str, store: str) -> list[int]:
    """The task partitions that have anything of ``store`` in the blob store (sorted)."""
    found = set()
    prefix = f"{job_label}/{store}/"
    for info in blob.list(prefix):
        partition = partition_of(Path(info.key[len(prefix) :].split("/", 1)[0]))
        if partition is not None:
            found.add(partition)
    return sorted(found)

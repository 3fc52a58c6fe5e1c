"""Retention of a task's store snapshots in a blob store, safe against concurrent readers and uploaders.

:func:`sweep` runs after each upload: the newest ``keep`` snapshots of the task are kept
(highest ownership generation first, then changelog offset), older indexes deleted. A file
blob no kept index names is first *marked* (a ``garbage/`` object holding the time), and
deleted only once it has been unreferenced for ``grace_s``.

Why nobody's files are deleted under them: an uploader (``stores/snapshot_upload.py``)
references an existing blob only if it carried no mark when the uploader listed the blob
store, and gives up a snapshot (writes no index) whose upload took longer than ``grace_s / 2``.
A mark set after that listing expires only after the uploader's index is written, and the
sweep that would delete the blob lists that index first, so the blob is kept. Two members
(a zombie and the new owner, or two sweeps) may sweep the same task at once: each only marks
what no index names and deletes what has been marked for ``grace_s``. A reader restoring
from an index that retention removes meanwhile has ``grace_s`` to finish its downloads.
Clocks of members must agree to well within ``grace_s`` (an hour by default).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from samzapy.stores.blob_store import BlobStore, BlobStoreError
from samzapy.stores.snapshot_index import SnapshotIndex, SnapshotLayout, TaskSnapshots

__all__ = ["SweepStats", "sweep"]


@dataclass(frozen=True)
class SweepStats:
    """What one retention pass did."""

    indexes_deleted: int
    files_marked: int
    files_deleted: int


def sweep(
    blob: BlobStore,
    layout: SnapshotLayout,
    *,
    keep: int,
    grace_s: float,
    clock: Callable[[], float] = time.time,
    cache: dict[str, SnapshotIndex] | None = None,
) -> SweepStats:
    """One retention pass over a task's store (module docstring).

    Keep the newest ``keep`` indexes, mark the file blobs none of them names, delete those
    marked ``grace_s`` ago.
    """
    view = TaskSnapshots(blob, layout, cache)
    now = clock()
    deleted_indexes = 0
    for name in view.index_names[: max(len(view.index_names) - keep, 0)]:
        blob.delete(layout.index_key(name))
        view.cache.pop(layout.index_key(name), None)  # the parsed-index cache keeps no deleted one
        deleted_indexes += 1
    view.refresh()  # the files of indexes written meanwhile must count as referenced
    referenced: set[str] = set()
    for name in view.index_names:
        try:
            referenced.update(f.key for f in view.index(name).files)
        except (BlobStoreError, ValueError):
            return SweepStats(deleted_indexes, 0, 0)  # unsure what is referenced: delete nothing
    marked = deleted = 0
    for key in sorted(view.files.keys() | view.marked):
        marker = layout.marker_key(key)
        if key in referenced:
            if key in view.marked:
                blob.delete(marker)  # referenced again: no longer garbage
            continue
        if key not in view.files:
            blob.delete(marker)  # the blob is gone already
            continue
        if key not in view.marked:
            blob.put_bytes(marker, json.dumps({"marked_at": now}).encode())
            marked += 1
            continue
        try:
            marked_at = float(json.loads(blob.get_bytes(marker))["marked_at"])
        except (BlobStoreError, ValueError, KeyError, TypeError):
            continue
        if now - marked_at >= grace_s:
            blob.delete(layout.full(key))
            blob.delete(marker)
            deleted += 1
    return SweepStats(deleted_indexes, marked, deleted)

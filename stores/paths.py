"""Where stores live on disk: the one module that spells the directory names.

Under ``job.logged.store.base.dir``, for store ``S`` of the task of partition ``N``::

    S/Partition_N/                          the live database (the task's own)
    S/Partition_N.checkpoints/<offset>/     local checkpoints of it (+ OFFSET file)
    S/Partition_N.standby/                  a standby replica of another container's task
    S/Partition_N.standby.checkpoints/      local checkpoints of that replica
    S/Partition_N.snapshot/<offset>-<id>/   a checkpoint's files staged for upload to a blob store
    S/Global_<container>/                   a global side-input store of one container

A checkpoint directory is named by the changelog offset it reflects; ``<offset>.tmp`` is
one being written (never trusted).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The name prefix of a task's store directory.
PARTITION_PREFIX = "Partition_"
#: A task's live store directory name (not its checkpoint or standby siblings).
PARTITION_DIR = re.compile(r"^Partition_(\d+)$")
CHECKPOINTS_SUFFIX = ".checkpoints"
STANDBY_SUFFIX = ".standby"
SNAPSHOT_SUFFIX = ".snapshot"


def partition_dir_name(partition: int) -> str:
    """The directory name of a task's store.

    >>> partition_dir_name(3)
    'Partition_3'
    """
    return f"{PARTITION_PREFIX}{partition}"


def partition_of(path: Path) -> int | None:
    """The partition a live store directory belongs to, ``None`` for any other directory.

    >>> partition_of(Path("state/counts/Partition_12")), partition_of(Path("x/Partition_1.standby"))
    (12, None)
    """
    match = PARTITION_DIR.match(path.name)
    return int(match.group(1)) if match else None


def store_dir(base_dir: Path, store: str, partition: int) -> Path:
    """The live directory of a store partition: ``<base_dir>/<store>/Partition_<N>``.

    >>> store_dir(Path("/state"), "counts", 0).as_posix()
    '/state/counts/Partition_0'
    """
    return base_dir / store / partition_dir_name(partition)


def partition_dirs(store_root: Path) -> list[Path]:
    """The live ``Partition_<N>`` directories under one store's directory, by partition."""
    if not store_root.is_dir():
        return []
    found = [p for p in store_root.iterdir() if p.is_dir() and partition_of(p) is not None]
    return sorted(found, key=lambda p: partition_of(p) or 0)


def checkpoints_dir(db_dir: Path) -> Path:
    """Where the local checkpoints of the database directory ``db_dir`` live.

    >>> checkpoints_dir(Path("/state/counts/Partition_0")).as_posix()
    '/state/counts/Partition_0.checkpoints'
    """
    return db_dir.with_name(db_dir.name + CHECKPOINTS_SUFFIX)


def snapshot_staging_dir(db_dir: Path) -> Path:
    """Where checkpoints of ``db_dir`` wait (as hard links) for their upload to a blob store.

    >>> snapshot_staging_dir(Path("/state/counts/Partition_0")).as_posix()
    '/state/counts/Partition_0.snapshot'
    """
    return db_dir.with_name(db_dir.name + SNAPSHOT_SUFFIX)


def standby_dir(base_dir: Path, store: str, partition: int) -> Path:
    """The working database of this container's standby copy of ``store`` of task ``partition``.

    >>> standby_dir(Path("/state"), "counts", 2).as_posix()
    '/state/counts/Partition_2.standby'
    """
    live = store_dir(base_dir, store, partition)
    return live.with_name(live.name + STANDBY_SUFFIX)


def global_store_dir(base_dir: Path, store: str, container_id: int) -> Path:
    """The directory of a global side-input store of container ``container_id``.

    >>> global_store_dir(Path("/state"), "zips", 1).as_posix()
    '/state/zips/Global_1'
    """
    return base_dir / store / global_label(container_id)


def global_label(container_id: int) -> str:
    """The name of a container's global store instance (directory and metrics group)."""
    return f"Global_{container_id}"


def directory_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (0 when it is gone); safe while a database writes there.

    A file deleted during the walk is skipped.
    """
    total = 0
    try:
        entries = list(os.scandir(path))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                total += directory_bytes(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total

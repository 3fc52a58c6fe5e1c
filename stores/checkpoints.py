"""Local store checkpoints.

RocksDB checkpoints (hard links) taken at commit, each with an ``OFFSET`` file naming the
changelog offset it reflects (Samza's transactional state).

Layout: ``<base>/<store>/Partition_<N>.checkpoints/<offset>/`` holding the database files and
``OFFSET`` (JSON: ``{"topic": ..., "partition": ..., "offset": ...}``). A checkpoint is built in
a ``.tmp`` directory and renamed into place, so a crash never leaves a half-written one under a
valid name.

A checkpoint shares its files with the live store through hard links (RocksDB's checkpoints
are hard links, as Samza's are): a damaged SST file damages both. So the restore verifies a
checkpoint's checksums before using it (:func:`samzapy.stores.restore.choose_base`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from samzapy.stores.paths import checkpoints_dir

__all__ = ["KEEP", "OFFSET_FILE", "Checkpointable", "LocalCheckpoint", "LocalCheckpoints", "checkpoints_dir"]

log = logging.getLogger(__name__)

OFFSET_FILE = "OFFSET"
#: How many local checkpoints a store keeps (the newest ones).
KEEP = 3


@dataclass(frozen=True)
class LocalCheckpoint:
    """One checkpoint directory and the changelog offset its OFFSET file records."""

    path: Path
    offset: int


class Checkpointable(Protocol):
    """An engine that can write a checkpoint of itself (:class:`~samzapy.stores.rocksdb.RocksDBStore`)."""

    def checkpoint_to(self, target: Path) -> None:
        """Write a checkpoint of the current state into ``target`` (which must not exist)."""


class LocalCheckpoints:
    """The local checkpoints of one store partition."""

    def __init__(self, store_dir: Path, topic: str, partition: int, keep: int = KEEP) -> None:
        self.root = checkpoints_dir(store_dir)
        self.topic = topic
        self.partition = partition
        self.keep = keep

    def _parse(self, path: Path) -> LocalCheckpoint | None:
        try:
            data = json.loads((path / OFFSET_FILE).read_text())
            offset = data["offset"]
            if data["topic"] != self.topic or data["partition"] != self.partition:
                log.warning(
                    "local checkpoint %s is of %s/%s, not %s/%s: ignored (a store of the same name"
                    " of another job in this directory? give each job its own job.logged.store.base.dir)",
                    path,
                    data["topic"],
                    data["partition"],
                    self.topic,
                    self.partition,
                )
                return None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                msg = f"offset {offset!r} is not a non-negative integer"
                raise ValueError(msg)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("local checkpoint %s has no usable OFFSET file (%s): ignored", path, exc)
            return None
        return LocalCheckpoint(path, offset)

    def newest_first(self) -> list[LocalCheckpoint]:
        """Every checkpoint with a valid OFFSET file, highest offset first."""
        if not self.root.is_dir():
            return []
        found = [self._parse(p) for p in self.root.iterdir() if p.is_dir() and not p.name.endswith(".tmp")]
        return sorted((c for c in found if c is not None), key=lambda c: c.offset, reverse=True)

    def create(self, store: Checkpointable, offset: int) -> Path | None:
        """Checkpoint ``store`` (a ``RocksDBStore``) at changelog ``offset``; keep the newest.

        Returns the new directory, or ``None`` when a checkpoint at that offset exists already.
        """
        target = self.root / str(offset)
        if target.exists():
            return None
        tmp = self.root / f"{offset}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        store.checkpoint_to(tmp)
        record = {"topic": self.topic, "partition": self.partition, "offset": offset}
        with open(tmp / OFFSET_FILE, "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, target)
        self.prune()
        return target

    def prune(self) -> None:
        """Delete all but the newest ``keep`` checkpoints, and any leftover ``.tmp`` or invalid one."""
        if not self.root.is_dir():
            return
        keep = {c.path for c in self.newest_first()[: self.keep]}
        for path in self.root.iterdir():
            if path not in keep:
                shutil.rmtree(path, ignore_errors=True)

    def delete(self, checkpoint: LocalCheckpoint) -> None:
        """Delete one checkpoint (it can never be used again)."""
        shutil.rmtree(checkpoint.path, ignore_errors=True)

    def delete_all(self) -> None:
        """Delete every checkpoint of the store."""
        shutil.rmtree(self.root, ignore_errors=True)

"""Where a query reads a task's store from.

The live engine of a running task, or a stale copy (the newest local checkpoint on disk) while
the task restores.

**Why the engine, below the object cache.** The query server answers on its own threads
while the run loop writes the stores. The object cache (``CachedStore``) is a plain
``OrderedDict`` the loop mutates on every read and write: touching it from another thread
could corrupt it. The engine at the bottom of the stack (RocksDB) is safe to read from
another thread while the loop writes (RocksDB reads are thread-safe; iterators see an
implicit snapshot). Every commit writes the cache down to the engine first, so the engine
holds at least the last committed state, plus any dirty entries written down since (when
the write batch fills or a dirty entry is evicted): reads are **committed-or-newer**. A
value still only in the cache (written since the last write-down) is not seen yet; at the
latest it is at the next commit (``task.commit.ms``). Newer-than-committed values may be
undone if the container crashes before its next commit (see docs/queries.md).

The alternative, handing each request to the run loop between batches, would see the cache
too, but would make every answer wait for a poll and would let queries slow the loop down;
reading the engine never blocks the loop.

The engines say how they are read from another thread in their read views
(``StorageEngine.read_view()``: :mod:`samzapy.stores.rocksdb_views`,
:class:`samzapy.stores.memory.InMemoryView`); a scan that meets a damaged block raises
:class:`~samzapy.errors.StorageFailure` rather than answering with part of the range.

Stale sources implement :class:`StaleSource`; :class:`LocalCheckpointSource` is the one
samzapy ships: the newest checkpoint on this machine, the task's own or a standby replica's.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from samzapy.config.model import JobConfig, StoreConfig
from samzapy.errors import StorageFailure
from samzapy.stores.base import ReadView
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.paths import standby_dir, store_dir
from samzapy.stores.rocksdb_views import ReadOnlyRocksDB

log = logging.getLogger(__name__)


class StoreReader(Protocol):
    """Read-only access to one task's partition of a store, in key bytes."""

    #: A short description of where the data comes from, for answers ("live", "checkpoint 41").
    source: str

    def get(self, key: bytes) -> bytes | None:
        """The stored value of ``key``, or ``None``."""

    def range(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries with ``from_key <= key < to_key``, in key byte order.

        A ``None`` bound is open.
        """

    def close(self) -> None:
        """Release what the reader holds."""


class StaleSource(Protocol):
    """Somewhere a possibly stale copy of a task's store can be read from.

    Read while the task itself cannot answer (it is restoring): a local checkpoint, or a
    standby replica.
    """

    def reader(self, store: str, partition: int) -> StoreReader | None:
        """A reader of the copy of ``store`` for task ``partition``, or ``None`` if there is none."""


class LiveReader:
    """Reads the engine under a live store from another thread.

    The engine (RocksDB or in-memory) is read through its read view
    (:meth:`samzapy.stores.StorageEngine.read_view`).

    The caller must not use it once the store is closed (the query service stops before the
    container closes its stores).
    """

    source = "live"

    def __init__(self, view: ReadView) -> None:
        self.view = view

    def get(self, key: bytes) -> bytes | None:
        """The engine's value of ``key``."""
        return self.view.get(key)

    def range(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries of the engine in ``[from_key, to_key)``."""
        return self.view.scan(from_key, to_key, limit)

    def close(self) -> None:
        """Nothing to release: the store belongs to its task."""


class CheckpointReader:
    """A local checkpoint (a directory nobody writes), opened read-only."""

    def __init__(self, path: Path, source: str, ttl: bool = False) -> None:
        self.source = source
        self._db = ReadOnlyRocksDB(path, ttl=ttl)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` in the checkpoint."""
        return self._db.get(key)

    def range(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries of the checkpoint in ``[from_key, to_key)``."""
        return self._db.scan(from_key, to_key, limit)

    def close(self) -> None:
        """Close the read-only database."""
        self._db.close()


class LocalCheckpointSource:
    """The newest checkpoint of a store partition on this machine.

    The task's own local checkpoints (``Partition_<N>.checkpoints/<offset>``, taken at its
    commits) or a standby replica's (``Partition_<N>.standby.checkpoints/<offset>``, taken at
    the owner's committed offsets, see :mod:`samzapy.container.standby_store`), whichever is
    newer. Either is a committed state, older than the live store.

    Stores without a changelog or on the in-memory engine have no checkpoints.
    """

    def __init__(self, job: JobConfig) -> None:
        self.job = job

    def reader(self, store: str, partition: int) -> StoreReader | None:
        """A read-only reader of the newest usable checkpoint, or ``None``."""
        config: StoreConfig | None = self.job.stores.get(store)
        if config is None or config.changelog is None or config.engine != "rocksdb":
            return None
        live = store_dir(self.job.logged_store_base_dir, store, partition)
        standby = standby_dir(self.job.logged_store_base_dir, store, partition)
        found = [
            (checkpoint, label)
            for path, label in ((live, "checkpoint"), (standby, "standby checkpoint"))
            for checkpoint in LocalCheckpoints(path, config.changelog.stream, partition).newest_first()
        ]
        for checkpoint, label in sorted(found, key=lambda item: item[0].offset, reverse=True):
            try:
                return CheckpointReader(
                    checkpoint.path, f"{label} {checkpoint.offset}", ttl=config.ttl_ms is not None
                )
            except StorageFailure as exc:  # try an older one
                log.info("query: checkpoint %s does not open (%s)", checkpoint.path, exc)
        return None

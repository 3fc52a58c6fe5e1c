"""One standby copy of one store of another container's task.

A RocksDB database kept at the owner's latest *committed* changelog offset, and local
checkpoints of it.

Layout, next to where the store would live if this container owned the task::

    <job.logged.store.base.dir>/<store>/Partition_<N>.standby/              the working database
    <job.logged.store.base.dir>/<store>/Partition_<N>.standby.checkpoints/  <offset>/ + OFFSET

The checkpoints have the format of the owner's (:mod:`samzapy.stores.checkpoints`), so a
container that takes the task over moves them next to its store before restoring
(:func:`samzapy.container.standby.adopt_standby_checkpoints`) and replays only the changelog
records written after the newest one. They are kept apart from the owner's own directories so
that a standby sharing a base dir with the owner never touches the owner's files.

Why never beyond ``K`` (the owner's checkpointed changelog offset): a RocksDB checkpoint is a
picture of the whole database, so one taken at ``K`` must hold exactly the records ``<= K``.
Records after ``K`` may still be undone by the owner's next restore (transactional state), so
the standby reads up to ``K`` and stops; it goes on when the owner commits again.

Not thread-safe: the standby thread owns every instance.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from samzapy.checkpoint import ChangelogFence
from samzapy.config.model import StoreConfig
from samzapy.errors import StoreLockedError
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.factory import rocksdb_options
from samzapy.stores.paths import standby_dir
from samzapy.stores.restore import changes, choose_base
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.stores.snapshot_restore import SnapshotSource
from samzapy.streams import task_name_for

log = logging.getLogger(__name__)

#: How long a standby waits for its working database's lock (held by another standby of the
#: same task on the same base dir) before it gives that copy up.
LOCK_TIMEOUT_S = 2.0


__all__ = ["LOCK_TIMEOUT_S", "StandbyStore", "standby_dir"]


class StandbyStore:
    """The standby copy of one logged RocksDB store of one task.

    :meth:`catch_up` applies the changelog up to the owner's committed offset ``K`` (never
    beyond, see the module doc); :meth:`maybe_checkpoint` takes a local checkpoint at ``K``
    at most every ``commit_s`` seconds. The working database is never trusted at start (a
    killed standby may have left it anywhere): it is rebuilt from the newest standby
    checkpoint at or below ``K``, exactly as a restore does.

    Metrics (group ``standby.<store>.<task>``): ``standby-committed-offset`` (``K``, -1:
    none yet), ``standby-applied-offset``, ``standby-checkpoint-offset``, ``standby-lag``
    (changelog records a failover would replay now: ``K`` minus the newest standby
    checkpoint), ``standby-applied-messages``, ``standby-checkpoints``.
    """

    def __init__(
        self,
        config: StoreConfig,
        partition: int,
        base_dir: Path,
        servers: str,
        metrics: MetricsGroup,
        snapshots: SnapshotSource | None = None,
    ) -> None:
        assert config.changelog is not None, "only logged stores have standbys"
        # the store's snapshots in a blob store: a copy starting cold starts from the newest one
        self._snapshots = snapshots
        self.name = config.name
        self.partition = partition
        self.task_name = task_name_for(partition)
        self.config = config
        self.path = standby_dir(base_dir, config.name, partition)
        # read-only: a standby never writes to Kafka (a send raises ChangelogWriteRefused)
        self.changelog = KafkaChangelog.read_only(config.changelog.stream, partition, servers)
        self._fence: ChangelogFence | None = None  # the owner checkpoint's, set by catch_up
        self.checkpoints = LocalCheckpoints(self.path, config.changelog.stream, partition)
        self.raw: RocksDBStore | None = None
        self.disabled = False
        self.committed: int | None = None
        self.applied = -1  # offset of the last changelog record in the working database
        self.checkpointed = -1
        self._last_checkpoint_at = float("-inf")
        self._committed_gauge = metrics.gauge("standby-committed-offset")
        self._applied_gauge = metrics.gauge("standby-applied-offset")
        self._checkpoint_gauge = metrics.gauge("standby-checkpoint-offset")
        self._lag = metrics.gauge("standby-lag")
        self._applied_messages = metrics.counter("standby-applied-messages")
        self._checkpoint_count = metrics.counter("standby-checkpoints")
        self._update_gauges()

    def __repr__(self) -> str:
        return f"standby of store {self.name!r} of {self.task_name}"

    def _open(self, k: int | None) -> None:
        """Open the working database and set it back to the newest standby checkpoint <= k."""
        try:
            self.raw = RocksDBStore(self.path, rocksdb_options(self.config), LOCK_TIMEOUT_S)
        except StoreLockedError as exc:
            log.warning("%s: given up: %s", self, exc)
            self.disabled = True
            return
        self._rebase(k)

    def _rebase(self, k: int | None) -> None:
        assert self.raw is not None  # opened by _open
        end = self.changelog.end_offset()
        if k is not None and k >= end:
            log.error(
                "%s: the owner's checkpointed changelog offset %d is beyond the end of %s (%d): "
                "the changelog lost committed state; this standby copy is given up",
                self,
                k,
                self.changelog,
                end,
            )
            self.disabled = True
            return
        if self._snapshots is not None and k is not None:
            self._snapshots.fetch(self.checkpoints, k, self._fence, end)  # a standby checkpoint now
        base = choose_base(self.raw, self.checkpoints, k, end)
        self.applied = -1 if base is None else base
        self.checkpointed = self.applied
        log.info(
            "%s: starts from %s; the owner committed changelog offset %s",
            self,
            "scratch" if base is None else f"standby checkpoint {base}",
            k,
        )

    def catch_up(self, k: int | None, stop: threading.Event, fence: ChangelogFence | None = None) -> None:
        """Apply the changelog records after what the copy holds, up to ``k`` inclusive.

        Except those ``fence`` (the owner checkpoint's ``ChangelogFence``) rules out: a
        zombie's, written after a takeover.

        Returns early when ``stop`` is set (between two fetched batches).
        """
        self._fence = fence
        if self.disabled or k is None:
            return
        if self.raw is None:
            self._open(k)
        elif k < self.applied:
            log.warning(
                "%s: the owner's committed changelog offset went back from %d to %d "
                "(checkpoint reset?): rebuilding the copy",
                self,
                self.applied,
                k,
            )
            self._rebase(k)
        # _open and _rebase may give the copy up; mypy keeps the narrowing above across calls
        if self.disabled:
            return  # type: ignore[unreachable]
        self.committed = k
        if k > self.applied:
            self._apply(k, stop)
        self._update_gauges()

    def _apply(self, k: int, stop: threading.Event) -> None:
        assert self.raw is not None
        fence = self._fence
        for batch in self.changelog.read(self.applied + 1, k + 1):
            kept = batch if fence is None else [r for r in batch if not fence.skips(r)]
            self.raw.put_all(changes(kept))
            self.applied = batch[-1].offset
            self._applied_messages.inc(len(batch))
            if stop.is_set():
                return
        if self.applied < k:
            end = self.changelog.end_offset()
            if end > k:
                # Every record up to k was read: the missing offsets are gone (compaction or
                # transaction markers), so the copy is at k.
                self.applied = k
            else:
                log.warning(
                    "%s: %s ends at %d, before the committed %d: retrying", self, self.changelog, end, k
                )

    def maybe_checkpoint(self, now: float, commit_s: float) -> None:
        """Take a local checkpoint at ``K`` when one is due.

        Due: the copy is there, ``K`` is not checkpointed yet, and the last one is at least
        ``commit_s`` old.
        """
        if self.raw is None or self.disabled or self.committed is None:
            return
        if self.applied != self.committed or self.applied == self.checkpointed:
            return
        if now - self._last_checkpoint_at < commit_s:
            return
        self.checkpoints.create(self.raw, self.applied)
        self.checkpointed = self.applied
        self._last_checkpoint_at = now
        self._checkpoint_count.inc()
        self._update_gauges()
        log.debug("%s: checkpoint at changelog offset %d", self, self.applied)

    @property
    def lag(self) -> int:
        """Changelog records a failover would replay now (0: the newest checkpoint is at K)."""
        if self.committed is None:
            return 0
        return self.committed - self.checkpointed

    def _update_gauges(self) -> None:
        self._committed_gauge.set(-1 if self.committed is None else self.committed)
        self._applied_gauge.set(self.applied)
        self._checkpoint_gauge.set(self.checkpointed)
        self._lag.set(self.lag)

    def close(self) -> None:
        """Close the working database and the changelog reader."""
        if self.raw is not None:
            self.raw.close()
            self.raw = None
        self.changelog.close_reader()

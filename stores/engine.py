"""``StorageEngine``: the store a task gets from ``context.get_store()``.

It is the outermost layer (metrics) and the handle the container uses for the store's life
cycle: restore before the first message, flush and checkpoint at every commit, close.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from samzapy.metrics import Counter, MetricsGroup
from samzapy.stores.base import KeyValueIterator, KeyValueStore, RawStore, ReadView
from samzapy.stores.changelog import ChangelogWriter, RestorableChangelog
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.paths import directory_bytes
from samzapy.stores.restore import RestoreStats, restore
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.stores.wrapped import WrappedStore

if TYPE_CHECKING:
    from samzapy.checkpoint import ChangelogFence
    from samzapy.stores.snapshot_restore import SnapshotSource

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class StorageEngine(WrappedStore[K, V], Generic[K, V]):
    """A store with its metrics, restore and checkpoints (Samza's ``KeyValueStorageEngine``).

    Store operations are counted and timed (``gets``/``get-ns``, ``puts``/``put-ns``,
    ``deletes``, ``ranges``, ``alls``, ``flushes`` and their ``-ns``) and passed to ``inner``,
    the chain that :func:`samzapy.stores.factory.build_store` assembled. ``raw`` is the engine
    at the bottom of that chain: restore writes into it directly, and :meth:`read_view` reads
    it from other threads.

    ``changelog`` is what the logged layer writes to. Only a
    :class:`~samzapy.stores.changelog.RestorableChangelog` makes the store restorable (and,
    on RocksDB, gives it local checkpoints); any other
    :class:`~samzapy.stores.changelog.ChangelogWriter`, or ``None``, leaves it local.

    The container's commit, in order:
      1. ``flush()`` every engine: caches written down, changelog records handed to the producer;
      2. flush the producer: every changelog write acknowledged;
      3. ``checkpoint(changelog_offset())`` every engine: a local RocksDB checkpoint;
      4. write the Kafka checkpoint (input offsets and each store's changelog offset).

    ``writes`` counts every put and delete, whatever the layers below do with it: the task
    shares one counter between its stores and its collector, so that the error policy can
    tell whether a failed call changed anything (:class:`samzapy.container.task_instance.TaskInstance`).

    Not thread-safe: one task owns it.
    """

    def __init__(
        self,
        name: str,
        partition: int,
        inner: KeyValueStore[K, V],
        *,
        raw: RawStore,
        changelog: ChangelogWriter | None = None,
        metrics: MetricsGroup | None = None,
    ) -> None:
        super().__init__(inner)
        self.name = name
        self.partition = partition
        self.raw = raw
        self.changelog = changelog
        self._restorable = changelog if isinstance(changelog, RestorableChangelog) else None
        self.metrics = metrics or MetricsGroup(f"store.{name}.Partition {partition}")
        counter = self.metrics.counter
        self._gets, self._get_ns = counter("gets"), counter("get-ns")
        self._puts, self._put_ns = counter("puts"), counter("put-ns")
        self._deletes, self._delete_ns = counter("deletes"), counter("delete-ns")
        self._ranges, self._range_ns = counter("ranges"), counter("range-ns")
        self._alls, self._all_ns = counter("alls"), counter("all-ns")
        self._flushes, self._flush_ns = counter("flushes"), counter("flush-ns")
        self._checkpoints = self._local_checkpoints()
        self._local_checkpoint_count = counter("local-checkpoints")
        self.metrics.gauge("disk-bytes", self.disk_bytes)
        self.writes = Counter()  # replaced by the task's shared one (see the class docstring)
        # The first layer below that reads for itself: a layer that does not override ``get``
        # passes it straight through, so calling past it is the same call a frame shorter
        # (the window operators' every update reads; ``inner`` is never replaced).
        self._read = _first_reader(inner)

    def _local_checkpoints(self) -> LocalCheckpoints | None:
        if not isinstance(self.raw, RocksDBStore) or self._restorable is None:
            return None
        return LocalCheckpoints(self.raw.path, self._restorable.topic, self._restorable.partition)

    @property
    def store_dir(self) -> Path | None:
        """The live RocksDB directory, ``None`` for an in-memory store."""
        return self.raw.path if isinstance(self.raw, RocksDBStore) else None

    def disk_bytes(self) -> int:
        """Bytes of the live store's files on disk (0 in memory); read from any thread."""
        return 0 if self.store_dir is None else directory_bytes(self.store_dir)

    def read_view(self) -> ReadView:
        """A read-only view of the engine another thread may read while the task writes.

        Committed-or-newer: the object cache above the engine is not seen.
        """
        return self.raw.read_view()

    # -- the store API, metered ---------------------------------------------------------

    def get(self, key: K) -> V | None:
        """The value of ``key`` or ``None``."""
        start = perf_counter_ns()
        value: V | None = self._read(key)
        self._get_ns.value += perf_counter_ns() - start
        self._gets.value += 1
        return value

    def get_all(self, keys: Iterable[K]) -> dict[K, V]:
        """The present values of ``keys``."""
        keys = list(keys)
        start = perf_counter_ns()
        found = self.inner.get_all(keys)
        self._get_ns.value += perf_counter_ns() - start
        self._gets.value += len(keys)
        return found

    def put(self, key: K, value: V | None) -> None:
        """Set ``key`` to ``value``; ``None`` deletes."""
        start = perf_counter_ns()
        self.inner.put(key, value)
        self._put_ns.value += perf_counter_ns() - start
        self._puts.value += 1
        self.writes.value += 1

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Set many keys atomically (one WriteBatch on the engine)."""
        entries = list(entries)
        start = perf_counter_ns()
        self.inner.put_all(entries)
        self._put_ns.value += perf_counter_ns() - start
        self._puts.value += len(entries)
        self.writes.value += len(entries)

    def delete(self, key: K) -> None:
        """Remove ``key``."""
        start = perf_counter_ns()
        self.inner.delete(key)
        self._delete_ns.value += perf_counter_ns() - start
        self._deletes.value += 1
        self.writes.value += 1

    def delete_all(self, keys: Iterable[K]) -> None:
        """Remove every key of ``keys`` atomically."""
        keys = list(keys)
        start = perf_counter_ns()
        self.inner.delete_all(keys)
        self._delete_ns.value += perf_counter_ns() - start
        self._deletes.value += len(keys)
        self.writes.value += len(keys)

    def delete_scanned(self, keys: list[K], from_key: K, to_key: K) -> None:
        """Remove ``keys``, every entry of ``[from_key, to_key)`` (see the base class), atomically."""
        start = perf_counter_ns()
        self.inner.delete_scanned(keys, from_key, to_key)
        self._delete_ns.value += perf_counter_ns() - start
        self._deletes.value += len(keys)
        self.writes.value += len(keys)

    def range(self, from_key: K, to_key: K) -> KeyValueIterator[K, V]:
        """Entries with ``from_key <= key < to_key`` in serialised-key order."""
        start = perf_counter_ns()
        found = self.inner.range(from_key, to_key)
        self._range_ns.value += perf_counter_ns() - start
        self._ranges.value += 1
        return found

    def all(self) -> KeyValueIterator[K, V]:
        """Every entry in serialised-key order."""
        start = perf_counter_ns()
        found = self.inner.all()
        self._all_ns.value += perf_counter_ns() - start
        self._alls.value += 1
        return found

    def flush(self) -> None:
        """Write caches down to the engine and hand changelog records to the producer.

        Does not flush the producer: the container does that once for every store (commit
        step 2).
        """
        start = perf_counter_ns()
        self.inner.flush()
        self._flush_ns.value += perf_counter_ns() - start
        self._flushes.value += 1

    # -- life cycle ------------------------------------------------------------------------

    def restore(
        self,
        checkpointed_offset: int | None,
        *,
        trusted_local: bool = True,
        fence: ChangelogFence | None = None,
        snapshots: SnapshotSource | None = None,
    ) -> RestoreStats:
        """Bring the store to the state of changelog offset ``checkpointed_offset``.

        Bring the store to the state of changelog offset ``checkpointed_offset`` (see
        :mod:`samzapy.stores.restore`); ``None``: nothing committed, the store ends up empty.
        ``fence`` (``samzapy.checkpoint.ChangelogFence``): the records a zombie wrote, skipped.

        ``trusted_local=False`` ignores local checkpoints (full restore, or from a snapshot).
        ``snapshots``: the store's snapshots in a blob store (RocksDB stores only), a base
        newer than the local checkpoints when they have one. A store without a changelog is
        not restorable: it is left as it is (the stats are all zero).
        """
        changelog = self._restorable
        if changelog is None:
            log.info(
                "store %s (partition %d) has no changelog: not restored, its state is only local",
                self.name,
                self.partition,
            )
            return RestoreStats(None, 0, 0, 0, 0, 0.0)
        self.invalidate()  # the caches above the engine would serve what restore replaces
        checkpoints = self._checkpoints if trusted_local else None
        if snapshots is not None and not trusted_local and self._checkpoints is not None:
            self._checkpoints.delete_all()  # untrusted local files out; a snapshot may come in
            checkpoints = self._checkpoints
        return restore(
            self.raw,
            changelog,
            checkpointed_offset,
            self.metrics,
            checkpoints,
            fence,
            snapshots if self._checkpoints is not None else None,
        )

    def changelog_offset(self) -> int | None:
        """The changelog offset the store reflects, for the checkpoint (``None``: none)."""
        return self._restorable.offset() if self._restorable is not None else None

    def checkpoint(self, changelog_offset: int | None) -> None:
        """Take a local checkpoint of a logged RocksDB store at ``changelog_offset``.

        Called at commit after the producer flush, for the stores the commit's schedule
        chooses (``samzapy.container.checkpoint_schedule``). Keeps the newest few; a no-op for
        in-memory or unlogged stores, for ``None``, and when that offset is checkpointed
        already.
        """
        raw = self.raw
        if self._checkpoints is None or changelog_offset is None or not isinstance(raw, RocksDBStore):
            return
        if self._checkpoints.create(raw, changelog_offset) is not None:
            self._local_checkpoint_count.inc()

    def abandon(self) -> None:
        """Close without writing anything more (the task is owned by another container now).

        What the layers hold in memory is dropped; nothing reaches the engine or the changelog.
        """
        self.invalidate()
        self.close()

    def close(self) -> None:
        """Flush and close every layer and the engine."""
        try:
            self.inner.close()
        finally:
            if self._restorable is not None:
                self._restorable.close_reader()

    def __repr__(self) -> str:
        return f"StorageEngine({self.name!r}, partition={self.partition})"


def _first_reader(store: KeyValueStore[Any, Any]) -> Callable[[Any], Any]:
    """The ``get`` of ``store`` or of the first layer below it that overrides ``get``."""
    while isinstance(store, WrappedStore) and type(store).get is WrappedStore.get:
        store = store.inner
    return store.get

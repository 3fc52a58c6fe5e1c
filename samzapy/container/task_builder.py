"""Building a task the same way everywhere: in the container, in a Spark replay, in ``TaskHarness``.

A task is its stores (built by :func:`samzapy.stores.factory.build_store`, each with the
changelog the caller chooses: Kafka in the container, a discarding one in a replay, a
collecting one in the harness), its metrics groups (``store.<store>.Partition N`` and
``task.Partition N``), its :class:`~samzapy.context.StoreContext`, and the ``init`` call
that hands the context to the user's task. :class:`TaskBuilder` is the one place that does
this, so that a task sees the same stores and context in every runner; the runners differ
only in where changelogs and outputs go and whether stores are restored.

:func:`ensure_output_topic` is the one rule for an output stream's partition count: the
topic's own, else ``systems.<system>.streams.<stream>.partitions``, else
``systems.<system>.default.stream.partitions``, else the task count (it is created then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import JobConfig
from samzapy.config.model import StoreConfig
from samzapy.container.collector import OutputStreams, TaskCollector
from samzapy.container.error_policy import ErrorPolicy
from samzapy.container.side_inputs import SideInputs
from samzapy.container.task_instance import TaskInstance, TaskStores
from samzapy.context import StoreContext
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.records import RecordSink
from samzapy.serdes import SerdeResolver
from samzapy.stores.changelog import ChangelogWriter
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.rocksdb_options import budget_of, use_memory_budget
from samzapy.stores.snapshot_restore import SnapshotSource
from samzapy.stores.snapshots import JobSnapshots
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for
from samzapy.task import StreamTask
from samzapy.user_code import user_failure

#: Makes the changelog writer of a logged store for a task: ``(store config, partition)``.
ChangelogFor = Callable[[StoreConfig, int], ChangelogWriter]


def ensure_output_topic(
    admin: Any, job: JobConfig, stream: SystemStream, task_count: int, *, create: bool = True
) -> int:
    """The partition count of output ``stream``, creating its topic when missing.

    See the module docstring; with ``create=False`` (a replay writing files) only the count.
    """
    existing: int | None = admin.partition_count(stream.stream)
    if existing is not None:
        return existing
    configured = job.stream(stream).partitions or job.default_partitions or task_count
    if not create:
        return configured
    created: int = admin.ensure_topic(stream.stream, configured, replication_factor=job.replication_factor)
    return created


class TaskBuilder:
    """Builds the stores, context and :class:`TaskInstance` of a job's tasks.

    Args:
        job: the parsed job config (tasks see its application keys through their context).
        base_dir: where RocksDB stores live (``<base_dir>/<store>/Partition_<N>``).
        registry: where the task and store metrics groups are registered.
        serdes: the job's serdes (shared with side inputs and outputs); made here if ``None``.
        changelog_for: the changelog writer of a logged store; ``None`` builds logged
            stores without one.
        side_inputs: the container's ``SideInputs``; a store with side inputs is then taken
            from it (filled and kept up to date there) instead of being built. ``None``
            builds such stores like the others (the harness).
        snapshots: the job's ``samzapy.stores.snapshots.JobSnapshots``; a restored store may
            then start from a snapshot in the blob store. ``None``: local checkpoints and
            changelog only.
    """

    def __init__(
        self,
        job: JobConfig,
        *,
        base_dir: Path,
        registry: MetricsRegistry,
        serdes: SerdeResolver | None = None,
        changelog_for: ChangelogFor | None = None,
        side_inputs: SideInputs | None = None,
        snapshots: JobSnapshots | None = None,
    ) -> None:
        self.job = job
        use_memory_budget(budget_of(job.rocksdb_memory_bytes))  # for the stores built from now on
        self._snapshots = snapshots
        self.base_dir = base_dir
        self.registry = registry
        self.serdes = serdes if serdes is not None else SerdeResolver(job)
        self._changelog_for = changelog_for
        self._side_inputs = side_inputs

    def stores(
        self, partition: int, checkpoint: TaskCheckpoint | None = None, *, restore: bool = False
    ) -> TaskStores:
        """The stores of task ``partition`` by name.

        With ``restore``, each restored (right after it is built) to the changelog offset
        ``checkpoint`` records for it (none: empty).
        """
        name = task_name_for(partition)
        stores: TaskStores = {}
        for store_config in self.job.stores.values():
            if store_config.has_side_inputs and self._side_inputs is not None:
                stores[store_config.name] = self._side_inputs.store(store_config.name, partition)
                continue
            changelog = None
            if store_config.changelog is not None and self._changelog_for is not None:
                changelog = self._changelog_for(store_config, partition)
            key_serde, msg_serde = self.serdes.for_store(store_config)
            store = build_store(
                store_config,
                partition=partition,
                base_dir=self.base_dir,
                key_serde=key_serde,
                msg_serde=msg_serde,
                changelog=changelog,
                metrics=self.registry.group(f"store.{store_config.name}.{name}"),
            )
            if restore:
                source = None
                if self._snapshots is not None:
                    source = self._snapshots.source(store_config, partition, checkpoint)
                self._restore(store, store_config.name, checkpoint, source)
            stores[store_config.name] = store
        return stores

    @staticmethod
    def _restore(
        store: StorageEngine[Any, Any],
        name: str,
        checkpoint: TaskCheckpoint | None,
        snapshots: SnapshotSource | None = None,
    ) -> None:
        """Restore ``store`` to the changelog offset ``checkpoint`` records for it (none: empty).

        Skipping the records its changelog fence rules out (a zombie's); from a snapshot in
        ``snapshots`` (a ``SnapshotSource``) when it has a newer base than the disk.
        """
        if checkpoint is None:
            store.restore(None)
            return
        extra: dict[str, Any] = {} if snapshots is None else {"snapshots": snapshots}
        store.restore(checkpoint.changelog_offsets.get(name), fence=checkpoint.fence_for(name), **extra)

    def task_metrics(self, partition: int) -> MetricsGroup:
        """The metrics group of task ``partition`` (``task.Partition N``)."""
        return self.registry.group(f"task.{task_name_for(partition)}")

    def init_task(self, task: StreamTask, partition: int, stores: TaskStores) -> None:
        """Call ``task.init(context)`` (if the task has an ``init``) with the task's context.

        What ``init`` raises passes through as it is (the harness shows it to the test).
        """
        if hasattr(task, "init"):
            task.init(self.context(partition, stores))

    def context(self, partition: int, stores: TaskStores) -> StoreContext:
        """The context ``init`` gets: task name, partition, config, stores and metrics."""
        return StoreContext(
            task_name_for(partition), partition, self.job, stores, self.task_metrics(partition)
        )

    def instance(
        self,
        partition: int,
        task: StreamTask,
        stores: TaskStores,
        producer: RecordSink,
        outputs: OutputStreams,
        inputs: Iterable[SystemStreamPartition],
        policy: ErrorPolicy,
    ) -> TaskInstance:
        """The :class:`TaskInstance` running ``task`` over ``inputs`` with ``stores``, ``init`` called.

        Outputs are sent through ``producer`` (``task.drop.producer.errors`` applied).

        Raises:
            TaskError: ``init`` raised; the message names the task and the user's line, and
                the user's traceback is logged (:mod:`samzapy.user_code`).
        """
        name = task_name_for(partition)
        metrics = self.task_metrics(partition)
        collector = TaskCollector(
            name,
            producer,
            outputs,
            drop_producer_errors=self.job.drop_producer_errors,
            dropped=metrics.counter("producer-errors-dropped"),
        )
        serdes = {ssp: self.serdes.for_stream(ssp.system_stream) for ssp in inputs}
        taken = self._side_inputs is not None  # side-input stores come from (and close with) SideInputs
        shared = frozenset(s.name for s in self.job.stores.values() if s.has_side_inputs and taken)
        instance = TaskInstance(name, partition, task, stores, collector, serdes, policy, metrics, shared)
        try:
            self.init_task(task, partition, stores)
        except Exception as exc:
            raise user_failure(name, "init() raised", exc) from exc
        return instance

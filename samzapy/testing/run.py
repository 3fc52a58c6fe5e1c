"""One life of a task in the test driver, from its start to its crash or stop.

The stores (restored or not), the task object, its ``TaskInstance`` and the commit, built as the
container builds them (``samzapy.container.run_loop``) over the driver's in-memory clients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint
from samzapy.config import JobConfig
from samzapy.container.async_runner import AsyncRunner
from samzapy.container.checkpoint_schedule import LocalCheckpointSchedule
from samzapy.container.collector import OutputStreams
from samzapy.container.commit import Commit
from samzapy.container.error_policy import ErrorPolicy, MessageFailure
from samzapy.container.input_order import order_key, stream_indexes
from samzapy.container.task_builder import TaskBuilder, ensure_output_topic
from samzapy.container.task_instance import TaskInstance
from samzapy.metrics import MetricsRegistry
from samzapy.serdes import SerdeResolver
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for
from samzapy.task import OutgoingMessageEnvelope
from samzapy.testing.broker import BrokerRecord, MemoryBroker, MemoryProducer
from samzapy.testing.changelog import BrokerChangelog
from samzapy.testing.collector import CrashPoints, RecordingCollector


@dataclass
class Shared:
    """What every run of one harness shares.

    The job, the clients, and what is kept across runs (outputs, the wall clock, the armed crash
    points).
    """

    job: JobConfig
    partition: int
    base_dir: Path
    registry: MetricsRegistry
    serdes: SerdeResolver
    producer: MemoryProducer
    input_broker: MemoryBroker
    crash_points: CrashPoints
    outputs: list[OutgoingMessageEnvelope]
    serialized: list[tuple[Any, Any]]
    wall_clock_ms: Callable[[], int]


class TaskRun:
    """The task's parts for one run (see the module docstring).

    Args:
        shared: the harness's shared parts.
        task: the user's task object (``init`` is called by :meth:`init`).
        inputs: the task's input partitions.
        checkpoint: what the run starts from (``None``: nothing committed).
        restore: restore the stores to ``checkpoint`` (a restart); else they are used as they
            are on disk (a fresh harness).
        generation: the ownership generation stamped on changelog records and checkpoints.
    """

    def __init__(
        self,
        shared: Shared,
        task: Any,
        inputs: list[SystemStreamPartition],
        checkpoint: TaskCheckpoint | None,
        *,
        restore: bool,
        generation: int,
    ) -> None:
        self._shared = shared
        self.generation = generation
        self.changelogs: dict[str, BrokerChangelog] = {}
        job, partition = shared.job, shared.partition
        self._builder = TaskBuilder(
            job,
            base_dir=shared.base_dir,
            registry=shared.registry,
            serdes=shared.serdes,
            changelog_for=self._changelog_for,
        )
        stores = self._builder.stores(partition, checkpoint, restore=restore)
        shared.producer.flush()  # the restore's trim writes, acknowledged before processing starts
        self.instance = TaskInstance(
            task_name_for(partition),
            partition,
            task,
            stores,
            self._collector(),
            {ssp: shared.serdes.for_stream(ssp.system_stream) for ssp in inputs},
            ErrorPolicy(job, shared.producer),
            self._builder.task_metrics(partition),
        )
        self.instance.offsets.update({ssp: self.start_offset(ssp, checkpoint) for ssp in inputs})
        #: Runs an :class:`~samzapy.AsyncStreamTask` as the container does (lanes, retries,
        #: timeouts; drained before a commit or a window call); ``None`` for other tasks.
        self.runner = AsyncRunner.for_tasks([self.instance], job, ErrorPolicy(job, shared.producer))
        if self.runner is not None:
            self.runner.start()
        self._flushes = 0
        self._order = DeliveryOrder(job)
        #: The task asked to shut down: committed, processes nothing more.
        self.stopped = False
        #: The wall clock at the last ``window()`` call and the last commit (or the start).
        self.last_window_ms = self.last_commit_ms = shared.wall_clock_ms()
        self._commit = Commit(
            shared.producer,
            _CrashingWriter(shared.producer, job.checkpoint_topic, shared.crash_points),
            LocalCheckpointSchedule(
                {s.name: s.local_checkpoint_ms for s in job.stores.values()}, job.commit_ms
            ),
            self._checkpoint_of,
            shared.registry.group("container"),
            drain=None if self.runner is None else self.runner.drain,
            flush=self._flush,
        )

    def init(self) -> None:
        """Call the task's ``init`` with its context; what it raises passes through as it is."""
        self._builder.init_task(self.instance.task, self._shared.partition, self.instance.stores)

    def add_input(self, ssp: SystemStreamPartition, stream: SystemStream) -> None:
        """Make ``ssp`` an input of the running task, starting where a job would.

        A stream the test sends to that ``task.inputs`` does not name.
        """
        self.instance.input_serdes[ssp] = self._shared.serdes.for_stream(stream)
        self.instance.offsets[ssp] = self.start_offset(ssp, None)
        if self.runner is not None:  # nothing is held between two calls: trackers start afresh
            self.runner.add(self.instance)

    def window(self) -> None:
        """The task's ``window``, then what it asked of its coordinator.

        Async tasks are drained first, as the run loop does.

        Raises:
            TaskError: ``window`` raised, or (a ``MessageFailure``) an async message failed.
        """
        if self.runner is not None:
            self.runner.drain()
        self.instance.window()
        self.last_window_ms = self._shared.wall_clock_ms()
        self._after_call()

    def process_available(self, input_broker: MemoryBroker) -> int:
        """Process every waiting record of the task's inputs in ``input_broker``; return how many.

        In the order the broker took them, doing what the task asks of its coordinator after
        each call (a commit; a shutdown: a final commit, then :attr:`stopped`).

        Raises:
            MessageFailure: a message stopped the task; what came before it was committed
                when that is safe (as the container does).
        """
        if self.runner is not None:
            return self._process_async(input_broker)
        done = 0
        while not self.stopped:
            found = next_record(input_broker, self.instance.offsets, self._order)
            if found is None:
                break
            try:
                self.instance.process_records(found[0], [found[1]])
            except MessageFailure as failure:
                if failure.safe_to_commit:
                    self.commit(final=True)
                raise
            done += 1
            self._after_call()
        return done

    def _process_async(self, input_broker: MemoryBroker) -> int:
        """An async task: every waiting record taken in, then the loop run until all are done.

        Lanes run them concurrently, one key in order, as before a commit. A failure is never
        safe to commit: later messages may be done.
        """
        runner, instance = self.runner, self.instance
        assert runner is not None
        admitted = dict(instance.offsets)
        done = 0
        while (found := next_record(input_broker, admitted, self._order)) is not None:
            ssp, record = found
            runner.submit(ssp, instance, [record])
            admitted[ssp] = record.offset + 1
            done += 1
        runner.drain()
        self._after_call()
        return done

    def _after_call(self) -> None:
        """What the run loop does after a task's call: commit when asked, stop when asked."""
        coordinator = self.instance.coordinator
        if coordinator.shutdown_requested:
            self.commit(final=True)
            self.stopped = True
        elif coordinator.commit_requested:
            self.commit()

    def close(self) -> None:
        """A clean stop's close: the async loop, then the task and its stores."""
        if self.runner is not None:
            self.runner.close()
        self.instance.close()

    def abandon(self) -> None:
        """A crash: messages in flight are dropped, stores closed without writing."""
        if self.runner is not None:
            self.runner.drop(self.instance)
            self.runner.close()
        self.instance.abandon()

    def commit(self, *, final: bool = False) -> None:
        """The container's commit of this task (``final``: every store's local checkpoint)."""
        self._flushes = 0
        self._commit([self.instance], final=final)
        self.last_commit_ms = self._shared.wall_clock_ms()

    def start_offset(self, ssp: SystemStreamPartition, checkpoint: TaskCheckpoint | None) -> int:
        """Where input ``ssp`` starts.

        The checkpoint's offset, else the oldest or the upcoming record
        (``samza.offset.default``), as in a job.
        """
        if checkpoint is not None and ssp in checkpoint.input_offsets:
            return checkpoint.input_offsets[ssp]
        if self._shared.job.stream(ssp.system_stream).offset_default == "oldest":
            return 0
        return self._shared.input_broker.end_offset((ssp.stream, ssp.partition))

    def _collector(self) -> RecordingCollector:
        shared = self._shared
        return RecordingCollector(
            task_name_for(shared.partition),
            shared.producer,
            OutputStreams(shared.serdes, self._output_partitions),
            outputs_kept=shared.outputs,
            serialized_kept=shared.serialized,
            wall_clock_ms=shared.wall_clock_ms,
            crash_points=shared.crash_points,
            drop_producer_errors=shared.job.drop_producer_errors,
            dropped=self._builder.task_metrics(shared.partition).counter("producer-errors-dropped"),
        )

    def _changelog_for(self, store_config: Any, partition: int) -> BrokerChangelog:
        crash_points = self._shared.crash_points
        changelog = self.changelogs[store_config.name] = BrokerChangelog(
            store_config.changelog.stream,
            partition,
            self._shared.producer,
            generation=self.generation,
            on_send=lambda: crash_points.reach("after-changelog-send"),
        )
        return changelog

    def _output_partitions(self, stream: SystemStream) -> int:
        """An output's partition count.

        The broker's topic, else the container's rule, with the broker's ``default_partitions``
        as the task count (at least this task's).
        """
        shared = self._shared
        broker = shared.producer.broker
        task_count = max(shared.partition + 1, broker.default_partitions)
        return ensure_output_topic(broker, shared.job, stream, task_count)

    def _checkpoint_of(
        self, task_name: str, inputs: dict[Any, int], changelogs: dict[str, int | None]
    ) -> TaskCheckpoint:
        return TaskCheckpoint(task_name, inputs, changelogs, generation=self.generation)

    def _flush(self, what: str) -> None:
        """The commit's producer flush; the first of a commit is the ``after-producer-flush`` crash point."""
        self._shared.producer.flush()
        self._flushes += 1
        if self._flushes == 1:
            self._shared.crash_points.reach("after-producer-flush")


def next_record(
    broker: MemoryBroker,
    positions: dict[SystemStreamPartition, int],
    order: DeliveryOrder | None = None,
) -> tuple[SystemStreamPartition, BrokerRecord] | None:
    """The input record to process next.

    Among the partitions of ``positions``, the head (the first record at or after its position)
    that comes first in ``order`` (default: the one ``broker`` took first, several inputs read
    in the order they were sent).
    """
    best: tuple[SystemStreamPartition, BrokerRecord] | None = None
    best_key: Any = None
    for ssp, position in positions.items():
        log = broker.log(ssp.stream, ssp.partition)
        at = log.index_of(position)
        if at >= len(log.records):
            continue
        record = log.records[at]
        key = record.sequence if order is None else order.key(ssp, record)
        if best is None or key < best_key:
            best, best_key = (ssp, record), key
    return best


class DeliveryOrder:
    """The order a job's task takes the records waiting in its inputs, as the container does.

    ``task.input.order=timestamp`` (the default): :func:`samzapy.container.input_order.order_key`,
    the key production's :class:`~samzapy.container.input_order.TimestampOrder` and the Spark
    replay merge by (bootstrap streams, then priority, then the record timestamp; ties by the
    stream's index in ``task.inputs``, the partition, the offset). So the records waiting in a
    driver (a backlog: what was sent while the task was down, or all at once) are taken as a
    job takes a backlog. ``arrival``: the order the broker took them.

    A stream a test sends to that ``task.inputs`` does not name ranks after those it names.
    """

    def __init__(self, job: JobConfig) -> None:
        self._job = job
        self._timestamp = job.input_order == "timestamp"
        self._indexes = stream_indexes(job.inputs)
        self._ranks: dict[SystemStreamPartition, tuple[bool, int, int]] = {}

    def key(self, ssp: SystemStreamPartition, record: BrokerRecord) -> Any:
        """Where ``record`` of ``ssp`` comes: smaller first."""
        if not self._timestamp:
            return record.sequence
        rank = self._ranks.get(ssp)
        if rank is None:
            rank = self._ranks[ssp] = self._rank(ssp)
        bootstrap, priority, index = rank
        return order_key(bootstrap, priority, record.timestamp, index, ssp.partition, record.offset)

    def _rank(self, ssp: SystemStreamPartition) -> tuple[bool, int, int]:
        stream = ssp.system_stream
        index = self._indexes.get(stream, len(self._indexes))
        configured = self._job.stream(stream)
        return configured.bootstrap, configured.priority, index


class _CrashingWriter(CheckpointWriter):
    """The checkpoint writer with the driver's crash points around its send."""

    def __init__(self, producer: MemoryProducer, topic: str, crash_points: CrashPoints) -> None:
        super().__init__(producer, topic)
        self._crash_points = crash_points

    def write(self, checkpoint: TaskCheckpoint) -> None:
        """Send ``checkpoint`` (the crash points: just before and just after)."""
        self._crash_points.reach("after-local-checkpoint")
        super().write(checkpoint)
        self._crash_points.reach("after-checkpoint-send")


def restore_copies(
    shared: Shared, changelogs: dict[str, BrokerChangelog], offsets: dict[str, int | None], round_dir: Path
) -> dict[str, StorageEngine[Any, Any]]:
    """Fresh stores in ``round_dir``, each restored from a copy of its changelog, by store name.

    Each is restored to ``offsets[store]`` (default: the changelog's last record); closed by the
    caller. A store whose restore fails is closed before the error passes on.
    """
    restored: dict[str, StorageEngine[Any, Any]] = {}
    for name, captured in changelogs.items():
        config = shared.job.stores[name]
        changelog = captured.copy()
        entries = changelog.entries
        key_serde, msg_serde = shared.serdes.for_store(config)
        store: StorageEngine[Any, Any] = build_store(
            config,
            partition=shared.partition,
            base_dir=round_dir,
            key_serde=key_serde,
            msg_serde=msg_serde,
            changelog=changelog,
            metrics=shared.registry.group(f"store.{name}.{task_name_for(shared.partition)}.{round_dir.name}"),
        )
        try:
            store.restore(offsets[name] if name in offsets else (entries[-1].offset if entries else None))
        except BaseException:
            store.close()
            for done in restored.values():
                done.close()
            raise
        restored[name] = store
    return restored

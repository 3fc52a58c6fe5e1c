"""The container: its tasks, the loop that runs them, a clean shutdown.

It starts the tasks of this container, runs the loop of poll -> process -> window -> commit, and
shuts down cleanly. Each job of it has a room of its own:

- ``assignment.py``: which tasks this container runs (and stands by for);
- ``startup.py``: input partition counts, changelog topics, where each input starts;
- ``task_builder.py``: a task's stores (restored), context, ``init`` and ``TaskInstance``;
- ``loop.py``: poll -> process -> window -> commit, until the container stops;
- ``task_instance.py`` / ``async_runner.py``: a message through ``process`` (sync, async);
- ``error_policy.py``: what a failed message does (dead-letter, skip, stop);
- ``commit.py``: the commit's numbered steps; ``fencing.py``: which tasks were taken over;
- ``task_manager.py``: every task's life (assign, revoke, lose), told to the parts that
  follow the tasks (``task_followers.py``).

Passthrough mode assigns its tasks once, at start; group mode's assignment changes them at
runtime (``group_tasks.py``). At a commit (every ``task.commit.ms``, on
``coordinator.commit()`` and at shutdown) the task manager loses the tasks the fence says
another container took over, then commits the rest. A crash anywhere leaves the last
checkpoint consistent (``commit.py``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TypeVar

from samzapy import stopping
from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoints
from samzapy.config import JobConfig
from samzapy.config.model import StoreConfig
from samzapy.container.assignment import standby_tasks_of, tasks_of
from samzapy.container.async_runner import AsyncRunner
from samzapy.container.checkpoint_schedule import LocalCheckpointSchedule
from samzapy.container.collector import OutputStreams
from samzapy.container.commit import Commit
from samzapy.container.error_policy import (
    ErrorPolicy,
    MessageFailure,
    how_to_go_on,
    storage_failure_advice,
    storage_failure_in,
)
from samzapy.container.fencing import SEND_LEASE_S, Fence, SendGate
from samzapy.container.group_tasks import GroupTasks
from samzapy.container.head_flush import HeadFlusher
from samzapy.container.inputs import Inputs
from samzapy.container.loop import RunLoop, processed
from samzapy.container.side_inputs import SideInputs
from samzapy.container.standby import StandbyReplicas, adopt_standby_checkpoints
from samzapy.container.startup import input_partition_counts, log_start, open_inputs, prepare_changelogs
from samzapy.container.task_builder import TaskBuilder, ensure_output_topic
from samzapy.container.task_followers import (
    AsyncFollower,
    GaugeFollower,
    HeadFlushFollower,
    InputsFollower,
    StandbyFollower,
    Standbys,
    StatusFollower,
)
from samzapy.container.task_instance import TaskInstance, TaskStores
from samzapy.container.task_manager import TaskManager
from samzapy.container.task_states import TaskState, Transition
from samzapy.errors import BadArgumentError, StorageFailure
from samzapy.health import ContainerStatus
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.broker import resolve_bootstrap_servers
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.kafka.outage import BrokerWait, StoppedDuringOutage
from samzapy.kafka.producer import FlushTimeout, Producer
from samzapy.metrics import MetricsRegistry
from samzapy.query.routing import GroupPlacement
from samzapy.query.startup import RunningQueries, start_queries
from samzapy.reporters import Reporters, register_container_gauges
from samzapy.serdes import SerdeResolver
from samzapy.status import RunningStatus, start_status
from samzapy.stores.rocksdb_options import budget_of, use_memory_budget
from samzapy.stores.snapshots import JobSnapshots
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for
from samzapy.task import AsyncStreamTask

log = logging.getLogger(__name__)

T = TypeVar("T")

#: One attempt of a commit's producer flush; an unacknowledged flush is retried while the
#: broker is unreachable (samzapy.kafka.outage), so a stop request is noticed between attempts.
FLUSH_ATTEMPT_S = 15.0
#: Producer close after a failure or a stop during an outage: do not wait for the broker.
ABORT_CLOSE_S = 2.0
#: kafka-python gives up on a batch after delivery.timeout.ms; keep batches alive for longer
#: than an outage is waited out (task.broker.unavailable.ms), plus one flush attempt.
DELIVERY_MARGIN_MS = 60_000


class Container:
    """Runs the tasks of one container of a job until it is stopped.

    Or, with ``exit_at_end``, until every input has been processed up to the end it had at
    start.
    """

    def __init__(
        self,
        job: JobConfig,
        *,
        container_id: int = 0,
        exit_at_end: bool = False,
        metrics_path: Path | None = None,
        instance_id: str | None = None,
    ) -> None:
        if not 0 <= container_id < job.container_count:
            msg = (
                f"--container-id {container_id} is out of range: job.container.count is {job.container_count}"
            )
            raise BadArgumentError(msg)
        self.job = job
        use_memory_budget(budget_of(job.rocksdb_memory_bytes))  # before any store opens (side inputs too)
        self.container_id = container_id
        self.exit_at_end = exit_at_end
        self.metrics_path = metrics_path
        self.instance_id = instance_id or job.instance_id
        self.group: GroupTasks | None = None  # group mode: the tasks follow the group's assignment
        self.registry = MetricsRegistry()
        self.metrics = self.registry.group("container")
        self.task_manager: TaskManager | None = None  # built at start: the one owner of the tasks
        self._final_tasks: list[TaskInstance] = []  # the tasks that ran to the end (the summary)
        self._last_checkpoints: dict[str, TaskCheckpoint] = {}  # the commit's, once it exists
        self._stop_requested = False
        self._signals = 0
        for name in ("commit-calls", "commit-ns", "window-ns"):  # in every snapshot from the start
            self.metrics.counter(name)
        self._producer: Producer | None = None
        self._inputs: Inputs | None = None
        self._admin: TopicAdmin | None = None
        self._fence: Fence | None = None
        self._commit_step: Commit | None = None
        self._snapshots: JobSnapshots | None = None  # store snapshots in a blob store (stores/snapshots.py)
        self._async: AsyncRunner | None = None  # runs the AsyncStreamTask tasks, if any
        self._standby: StandbyFollower | None = None  # warm copies of other containers' stores
        self._side_inputs: SideInputs | None = None  # stores filled from side-input topics
        self._queries: RunningQueries | None = None  # interactive queries (job.query.port)
        self._status_page: RunningStatus | None = None  # / and /status.json on the HTTP ports
        self._head_flusher: HeadFlusher | None = None  # stores.S.flush.at.head
        self._broker: BrokerWait | None = None  # waits out an unreachable broker at commits
        self._aborted = False  # stopped on a failure or during an outage: close without waiting
        self._local_checkpoints = LocalCheckpointSchedule(
            {s.name: s.local_checkpoint_ms for s in job.stores.values()}, job.commit_ms
        )
        self.status = ContainerStatus()  # for /health
        self.reporters = Reporters.from_job(job, self.registry, self.status, container_id)

    # ----------------------------------------------------------------- lifecycle
    def run(self) -> int:
        """Run to the end; returns 0 (the exit code of a clean stop).

        Raises:
            MessageFailure: a message failed and the error policy is to stop; its text says
                what was committed and how to let the job go on past such messages.
            SamzapyError, or anything task code raised outside a message (``init``,
                ``window``): the container closed, nothing since the last commit committed.
        """
        stopping.reset()
        self._install_signal_handlers()
        try:
            self._start()
        except Exception as error:
            self.status.failed(str(error))
            self._aborted = True
            self._close()
            raise
        try:
            self._loop()
            self._commit(final=True)
        except StoppedDuringOutage as stopped:
            # A stop requested during a broker outage: no commit (it needs the broker); exit 0.
            log.warning("%s", stopped)
            self._aborted = True
        except MessageFailure as failure:
            raise self._stopped_by(failure) from failure
        except Exception as error:
            # Printed once by the command line's error boundary (traceback with -v / in the log).
            storage = storage_failure_in(error)
            self.status.failed(f"{type(error).__name__}: {error}")
            self._aborted = True
            self._close()
            if storage is not None:  # a store failed at a commit's flush, in window(), ...
                text = f"the container stopped: {storage_failure_advice(storage)}"
                raise StorageFailure(text, store=storage.store, path=storage.path) from error
            raise
        self._close()
        gate = None if self._fence is None else self._fence.gate
        if gate is not None and gate.error is not None:  # fenced at a commit: exit 1, say by whom
            raise gate.error
        self._log_summary()
        return 0

    def _stopped_by(self, failure: MessageFailure) -> MessageFailure:
        """A message stopped the job.

        Commit what came before it when that is safe, close, and say what was committed and how
        to go on (the error the command line prints).
        """
        self.status.failed(str(failure))
        storage = storage_failure_in(failure) is not None
        if failure.safe_to_commit:
            self._commit(final=True)
            outcome = "the job stopped after committing every message before it"
        elif storage:
            outcome = "nothing since the last commit is committed; the next run resumes from that commit"
        else:
            outcome = (
                "the failed call had already changed state or sent output, so nothing since the "
                "last commit is committed; the next run resumes from that commit"
            )
        self._close()
        self._log_summary()
        fix = "" if storage else f" {how_to_go_on(failure)}"  # no setting skips a storage failure
        return MessageFailure(f"{failure}; {outcome}.{fix}", failure.safe_to_commit)

    def _install_signal_handlers(self) -> None:
        def handle(signum: int, _frame: FrameType | None) -> None:
            self._signals += 1
            if self._signals > 1:
                log.error("second %s: exiting at once, without a final commit", signal.Signals(signum).name)
                os._exit(1)
            log.info(  # the normal way to stop a run: not a warning
                "%s received: finishing the current message, committing, stopping",
                signal.Signals(signum).name,
            )
            self._stop_requested = True
            stopping.request_stop(f"{signal.Signals(signum).name} received")

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, handle)

    # ----------------------------------------------------------------- start-up
    def _start(self) -> None:
        job = self.job
        consumer_servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
        producer_servers = resolve_bootstrap_servers(job.producer_bootstrap_servers)
        self.reporters.start(producer_servers)
        self._admin = TopicAdmin(producer_servers)
        task_count, input_counts = input_partition_counts(self._admin, job)
        grouped = job.coordinator == "group"
        mine = [] if grouped else tasks_of(self.container_id, job.container_count, task_count)
        self.status.restoring(task_name_for(p) for p in mine)
        delivery_ms = job.broker_unavailable_ms + DELIVERY_MARGIN_MS
        self._producer = Producer(
            producer_servers, {"delivery.timeout.ms": delivery_ms, **job.producer_overrides}
        )
        self._broker = BrokerWait(
            producer_servers,
            job.broker_unavailable_ms / 1000,
            lambda: self._stop_requested,
            self.status.broker_unreachable,
        )
        manager = self.task_manager = TaskManager(
            _Factory(self),
            lambda tasks, final: _started(self._commit_step)(tasks, final=final),
            lambda: _started(self._broker).call(
                _started(self._fence).lost, "read the checkpoint topic (fencing check)"
            ),
            background=grouped,
        )
        # before any restore, so that queries answer "restoring" from the start
        self._queries = start_queries(self, task_count, consumer_servers, self._admin, self._producer)
        self._status_page = start_status(self, self._queries)
        found, checkpoints = self._claim(consumer_servers, mine)
        prepare_changelogs(self._admin, self._producer, job, task_count)
        self._policy = ErrorPolicy(job, self._producer)
        log_start(job, self.container_id, mine, input_counts, found)
        serdes = SerdeResolver(job)
        # Group mode: every task may come here, so the side-input stores of all of them are kept.
        side_input_tasks = list(range(task_count)) if grouped else mine
        self._side_inputs = SideInputs.build(
            job, side_input_tasks, consumer_servers, serdes, self.registry, self.container_id
        )
        self._side_inputs.catch_up()  # side-input stores are full before any init() or message
        self.builder = self._builder(consumer_servers, serdes)
        self._outputs = OutputStreams(
            serdes, lambda stream: ensure_output_topic(self._admin, job, stream, task_count)
        )
        self._input_counts = input_counts
        self._follow_tasks(manager, consumer_servers, input_counts, task_count)
        if any(s.restore_engine == "spark" for s in job.stores.values()):  # refused in group mode
            from samzapy.spark.restore import restore_for_container  # needs the spark extra

            adopt_standby_checkpoints(job, mine)
            restore_for_container(job, mine, checkpoints)
        manager.assign({p: checkpoints.get(task_name_for(p)) for p in mine})  # passthrough: the one assign
        self._producer.flush()  # trim writes of restores are acknowledged before processing starts
        manager.start_restored()
        if grouped:
            self.group = GroupTasks(
                job,
                manager,
                consumer_servers,
                input_counts,
                task_count,
                claim=self._claim_more,
                release=_started(self._fence).release,
                status=self.status,
                metrics=self.metrics,
                query_url=self.query_url,
                instance_id=self.instance_id,
                # the standby follower is subscribed below; read only once the group has a share
                copy_lags=lambda: {} if self._standby is None else self._standby.copy_lags(),
            )
            if self._queries is not None:  # queries route with the group's task -> endpoint map
                group = self.group
                placement = GroupPlacement(lambda: group.assignment, self._queries.url)
                manager.subscribe(placement)
                self._queries.service.placement = placement
        else:
            manager.stand_by(
                standby_tasks_of(
                    self.container_id, job.container_count, task_count, job.standby_replication_factor
                )
            )
        self.status.running()

    def _claim(
        self, consumer_servers: str, mine: list[int]
    ) -> tuple[dict[str, TaskCheckpoint], dict[str, TaskCheckpoint]]:
        """Read the checkpoints and take this container's tasks over (a new generation each).

        The takeover is acknowledged before anything is restored or written. Returns the
        checkpoints found and those to restore from: a claim race lost to another container is
        claimed again from the winner's checkpoint (``samzapy.container.fencing``).
        """
        job = self.job
        producer = _started(self._producer)
        _started(self._admin).ensure_topic(
            job.checkpoint_topic, 1, compact=True, replication_factor=job.replication_factor
        )
        checkpoints = read_checkpoints(consumer_servers, job.checkpoint_topic)
        self._checkpoint_writer = CheckpointWriter(producer, job.checkpoint_topic)
        fence = self._fence = Fence(consumer_servers, job.checkpoint_topic)
        found = dict(checkpoints)
        checkpoints.update(
            fence.claim([task_name_for(p) for p in mine], checkpoints, self._checkpoint_writer)
        )
        if job.coordinator != "group":  # a zombie stops at its first send after a takeover (issue 28)
            producer.guard(SendGate(fence, min(SEND_LEASE_S, job.commit_ms / 1000)).start())
        return found, checkpoints

    def _claim_more(self, task_names: list[str]) -> dict[str, TaskCheckpoint]:
        """Group mode: take these tasks over at runtime; their claim records.

        A new ownership generation each, acknowledged; the claim records name the offsets to
        restore to.
        """
        fence = _started(self._fence)
        return fence.claim(task_names, fence.current(), self._checkpoint_writer)

    def _builder(self, consumer_servers: str, serdes: SerdeResolver) -> TaskBuilder:
        producer, fence = _started(self._producer), _started(self._fence)

        def changelog_for(store_config: StoreConfig, partition: int) -> KafkaChangelog:
            changelog = store_config.changelog
            assert changelog is not None  # the task builder asks for logged stores alone
            return KafkaChangelog(
                changelog.stream,
                partition,
                producer,
                consumer_servers,
                generation=fence.generations[task_name_for(partition)],  # a header on every record
            )

        self._snapshots = JobSnapshots.for_job(self.job, self.metrics)
        return TaskBuilder(
            self.job,
            base_dir=self.job.logged_store_base_dir,
            registry=self.registry,
            serdes=serdes,
            changelog_for=changelog_for,
            side_inputs=self._side_inputs,
            snapshots=self._snapshots,
        )

    def _follow_tasks(
        self,
        manager: TaskManager,
        consumer_servers: str,
        input_counts: dict[SystemStream, int],
        task_count: int,
    ) -> None:
        """Build the parts that follow the tasks and subscribe them; then the commit.

        Inputs first: the others read the offsets it sets.
        """
        job = self.job
        self._inputs = open_inputs(job, consumer_servers, [], input_counts, {})
        if issubclass(job.task_type, AsyncStreamTask):
            self._async = AsyncRunner([], job, self._policy)
        manager.subscribe(InputsFollower(manager, self._inputs, job, input_counts, self._async))
        if self._async is not None:
            manager.subscribe(AsyncFollower(self._async))
        at_head = {s.name for s in job.stores.values() if s.flush_at_head}
        if at_head:
            self._head_flusher = HeadFlusher([], names=at_head)
            manager.subscribe(HeadFlushFollower(manager, self._head_flusher))
        # At and after shutdown the sums stay those of the tasks that ran to the end (the
        # reporters' last snapshot is sent after the tasks closed).
        register_container_gauges(
            self.registry, lambda: self._final_tasks if manager.closing else manager.running(), None
        )
        manager.subscribe(GaugeFollower(manager, self.registry, self._inputs))
        manager.subscribe(StatusFollower(manager, self.status))
        self._standby = StandbyFollower(manager, self._standby_starter(consumer_servers, task_count))
        manager.subscribe(self._standby)
        if job.coordinator != "group":
            manager.subscribe(_StopWhenFencedOut(manager, self._fenced_out))
        self._commit_step = Commit(
            _started(self._producer),
            self._checkpoint_writer,
            self._local_checkpoints,
            _started(self._fence).checkpoint,
            self.metrics,
            drain=None if self._async is None else self._async.drain,
            flush=self._flush,
            snapshots=self._snapshots,
        )
        self._last_checkpoints = self._commit_step.last_written  # the query service reads it

    def _standby_starter(self, servers: str, task_count: int) -> Callable[[list[int]], Standbys | None]:
        """How the standby replicas start.

        Passthrough mode names its own standbys (and logs them); group mode's come with the
        assignment.
        """
        job = self.job
        if job.coordinator == "group":
            return lambda partitions: StandbyReplicas.start(
                job, partitions, servers, self.registry, self.status
            )
        return lambda partitions: StandbyReplicas.start_for(
            job, self.container_id, task_count, servers, self.registry, self.status
        )

    def _fenced_out(self) -> None:
        """Passthrough mode: every task of this container is owned by another container now."""
        log.error("every task of this container is owned by another container now: stopping")
        self._stop_requested = True

    # ----------------------------------------------------------------- the loop
    def _loop(self) -> None:
        RunLoop(
            self.job,
            self._manager,
            _started(self._inputs),
            _started(self._side_inputs),
            self._async,
            self._head_flusher,
            self._commit,
            lambda: self._stop_requested,
            self.metrics,
            self._write_metrics,
            exit_at_end=self.exit_at_end,
            group=self.group,
        ).run()

    # ----------------------------------------------------------------- commit
    def _commit(self, *, final: bool = False) -> None:
        """Commit through the task manager, which first loses the fenced tasks.

        The fence says which tasks were taken over (:meth:`TaskManager.commit`). In group mode
        nothing is committed while the member's lease has lapsed (:meth:`GroupTasks.hold`).
        """
        if self.group is not None and not self.group.hold(lambda: self._stop_requested):
            return
        self._manager.commit(final=final)
        if self.group is not None:
            self.group.commit_offsets()
        self._write_metrics()

    @property
    def _manager(self) -> TaskManager:
        assert self.task_manager is not None, "the container has not started"
        return self.task_manager

    @property
    def query_url(self) -> str | None:
        """Where this container answers interactive queries, ``None`` when it does not."""
        return None if self._queries is None else self._queries.url

    @property
    def tasks(self) -> list[TaskInstance]:
        """The tasks running now (none before start).

        A snapshot, safe from any thread (the query service reads it); the task manager alone
        changes the tasks.
        """
        return [] if self.task_manager is None else list(self.task_manager.running())

    # ----------------------------------------------------------------- shutdown
    def _close(self) -> None:
        if self.group is not None:
            _try(self.group.close, "leaving the group")  # after the final commit
        if self._queries is not None:
            self._queries.stop()  # before the stores close: no query reads them after this
        if self.task_manager is not None:
            self._final_tasks = list(self.task_manager.running())  # for the summary line
            _try(self.task_manager.close, "closing the tasks")  # and the standbys
        snapshots = self._snapshots
        if snapshots is not None:  # the final commit's uploads, unless stopped on a failure
            _try(lambda: snapshots.close(0 if self._aborted else 30), "finishing snapshot uploads")
        if self._async is not None:
            self._async.close()
        if self._side_inputs is not None:
            self._side_inputs.close()
        if self._inputs is not None:
            self._inputs.consumer.close()
        if self._producer is not None:
            _try(self._close_producer, "closing the producer")
        if self._admin is not None:
            self._admin.close()
        if self._fence is not None:
            self._fence.close()
        self._write_metrics()
        self.status.stopped()
        if self._status_page is not None:
            self._status_page.stop()
        self.reporters.stop()

    def _flush(self, what: str) -> None:
        """Flush the producer, waiting out an unreachable broker (samzapy.kafka.outage)."""
        producer = _started(self._producer)
        _started(self._broker).call(lambda: producer.flush(FLUSH_ATTEMPT_S), what)

    def _close_producer(self) -> None:
        try:
            _started(self._producer).close(ABORT_CLOSE_S if self._aborted else None)
        except FlushTimeout as unacknowledged:
            log.warning("%s: they are not committed; the next run writes them again", unacknowledged)

    def _write_metrics(self) -> None:
        if self.metrics_path is None:
            return
        tmp = self.metrics_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.registry.snapshot(), indent=1, sort_keys=True, default=str))
        tmp.replace(self.metrics_path)

    def _log_summary(self) -> None:
        log.info(
            "stopped: %d messages processed, %d commits, %d skipped, %d dead-lettered",
            processed(self._final_tasks),
            self.metrics.counter("commit-calls").value,
            sum(t.failures.skipped.value for t in self._final_tasks),
            sum(t.failures.dead_lettered.value for t in self._final_tasks),
        )


class _Factory:
    """The task manager's :class:`~samzapy.container.task_manager.TaskFactory` over a started container.

    Its task builder, producer, outputs and error policy.
    """

    def __init__(self, container: Container) -> None:
        self._c = container

    def restore(self, partition: int, checkpoint: TaskCheckpoint | None) -> TaskStores:
        """The task's stores, restored; a standby copy kept here is adopted first."""
        adopt_standby_checkpoints(self._c.job, [partition])  # restore from the standby's checkpoints
        return self._c.builder.stores(partition, checkpoint, restore=True)

    def instance(self, partition: int, stores: TaskStores) -> TaskInstance:
        """The task's instance (``init`` called)."""
        c = self._c
        inputs = _input_ssps(c._input_counts, partition)
        task = c.job.task_type()
        return c.builder.instance(
            partition, task, stores, _started(c._producer), c._outputs, inputs, c._policy
        )


class _StopWhenFencedOut:
    """Passthrough mode: stops the container when fencing took its last task."""

    def __init__(self, manager: TaskManager, stop: Callable[[], None]) -> None:
        self._manager = manager
        self._stop = stop

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """Stop once no task is left, unless the container is closing anyway."""
        closed = any(c.after is TaskState.CLOSED and c.before is TaskState.SUSPENDED for c in changes)
        if closed and not self._manager.closing and not self._manager.running():
            self._stop()


def _input_ssps(input_counts: dict[SystemStream, int], partition: int) -> list[SystemStreamPartition]:
    """Task ``partition``'s input partitions: partition N of every input that has one."""
    return [
        SystemStreamPartition(s.system, s.stream, partition)
        for s, count in input_counts.items()
        if partition < count
    ]


def _try(close: Callable[[], object], what: str) -> None:
    """Run ``close``; log (not raise) a failure, so that shutdown goes on with the rest."""
    try:
        close()
    except Exception:
        log.exception("%s failed", what)


def _started(part: T | None) -> T:
    """``part`` of the container, which :meth:`Container._start` built before anything uses it."""
    assert part is not None, "the container has not started"
    return part

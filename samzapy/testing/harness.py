"""``TaskHarness``: one task of a job run in-process over the real runtime, without a broker.

The harness builds what the container builds for a task — its stores
(:class:`~samzapy.container.task_builder.TaskBuilder`: the real factory, layers and serdes),
its :class:`~samzapy.container.task_instance.TaskInstance` (deserialise, call ``process``,
track offsets), the :class:`~samzapy.container.error_policy.ErrorPolicy` and the
:class:`~samzapy.container.commit.Commit` with its checkpoint writer — over in-memory
clients (:mod:`samzapy.testing.broker`): input topics, output topics, changelogs and the
checkpoint topic all live in one :class:`MemoryBroker`. So a test runs the code a job runs.

On top, what a test needs and a job does not: a crash and a restart in-process
(:meth:`TaskHarness.crash`, :meth:`TaskHarness.crash_at`, :meth:`TaskHarness.restart`: the
stores are restored from the changelog at the last checkpoint by the real restore, input
resumes at the checkpointed offsets), and stream-time helpers (a wall clock that drives
``window()`` and the commit, watermark and end-of-stream control records).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from samzapy.checkpoint import CheckpointFold, TaskCheckpoint
from samzapy.config import Config, parse_job_config
from samzapy.container.collector import encode_output
from samzapy.container.error_policy import MessageFailure
from samzapy.container.task_instance import Coordinator, TaskInstance
from samzapy.errors import SamzapyError, TaskError
from samzapy.kafka.producer import MAX_REQUEST_SIZE_KEY
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.operators.event_time import CONTROL_HEADER, END_OF_STREAM, WATERMARK
from samzapy.serdes import SerdeResolver
from samzapy.stores.engine import StorageEngine
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for
from samzapy.task import OutgoingMessageEnvelope
from samzapy.testing.broker import DEFAULT_MAX_REQUEST_SIZE, BrokerRecord, MemoryBroker, MemoryProducer
from samzapy.testing.changelog import BrokerChangelog
from samzapy.testing.collector import Crash, CrashPoints, RecordingCollector, Unacknowledged
from samzapy.testing.run import Shared, TaskRun, restore_copies

_DEFAULTS = {"job.name": "harness", "task.class": "samzapy.task:StreamTask", "task.inputs": "kafka.input"}
T = TypeVar("T")

#: What the task is doing: ``running``; ``crashed`` (:meth:`TaskHarness.crash`); ``stopped``
#: (it asked to shut down: committed, not processing); ``failed`` (a message or ``window()``
#: stopped it, as it stops a job); ``closed``.
State = Literal["running", "crashed", "stopped", "failed", "closed"]


class HarnessError(SamzapyError):
    """The harness was asked something its state does not allow.

    For example ``window()`` while the task is crashed.
    """


class TaskHarness:
    """Runs one task (partition ``partition``) of a job in-process over the real runtime.

    ``config`` is a dict of job properties (``job.name``, ``task.class``, ``task.inputs`` get
    defaults) or a loaded :class:`~samzapy.config.Config`; ``task`` a task class, a
    ``module:Class`` name or a task object (a class or name gets a fresh object at each
    restart). Stores are built as the container builds them (RocksDB in a temporary
    directory, or ``base_dir``, unless the config says ``inmemory``); store writes and
    outputs go through the configured serdes, so a key or value that does not fit fails in the
    task's own ``put()`` or ``send()``, naming the store or stream and the config key that
    chose the serde. Messages go through the task's :class:`TaskInstance`: a stream with a
    serde carries bytes (:meth:`send` serialises, the runtime deserialises), a stream without
    one carries the objects given as they are.

    A fresh harness does not restore: over a ``base_dir`` a previous harness left, the task
    sees the stores as they are on disk. :meth:`restart` restores from the changelogs.

    Args:
        task: the task class, its ``module:Class`` name, or a task object.
        config: the job's properties.
        partition: the task's partition (``Partition N``).
        base_dir: where RocksDB stores live (default: a temporary directory, removed by
            :meth:`close`).
        broker: the in-memory broker to run over (default: a new one); several harnesses
            sharing one read each other's outputs (:meth:`process_available`).
        wall_clock_ms: the start of the harness's wall clock (:meth:`advance_wall_clock`).
        loopback: read input from :attr:`broker`, where the task writes, as a job reads its
            input topics: what the task sends to its own input partitions (an intermediate
            stream) comes back to it, and harnesses sharing a broker read each other's
            outputs. Off by default: the input is only what the test sends (kept apart, in
            :attr:`input_broker`), and the test delivers such records itself, in the order
            it chooses.

    Not thread-safe.
    """

    def __init__(
        self,
        task: type | Any,
        config: dict[str, str] | Config | None = None,
        *,
        partition: int = 0,
        base_dir: Path | None = None,
        broker: MemoryBroker | None = None,
        wall_clock_ms: int = 0,
        loopback: bool = False,
    ) -> None:
        raw = config if isinstance(config, Config) else Config.from_dict({**_DEFAULTS, **(config or {})})
        if isinstance(task, str):  # imported once, by the parse, as a run does
            raw = raw.with_overrides({"task.class": task})
        self.config = raw
        self.job = parse_job_config(raw, check_task_class=isinstance(task, str))
        self.partition = partition
        self.task_name = task_name_for(partition)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if base_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samzapy-harness-")
            base_dir = Path(self._tmp.name)
        self.base_dir = base_dir
        #: The in-memory Kafka: inputs, outputs, changelogs and the checkpoint topic.
        self.broker = broker if broker is not None else MemoryBroker()
        limit = raw.get_int(MAX_REQUEST_SIZE_KEY, DEFAULT_MAX_REQUEST_SIZE)
        #: The container's producer: outputs, changelog writes, dead letters, checkpoints.
        self.producer = MemoryProducer(self.broker, max_request_size=limit)
        self.registry = MetricsRegistry()
        self.serdes = SerdeResolver(self.job)
        #: Every envelope the task sent (every run of it: a restart's re-sent ones too), in
        #: order, with the id it was sent with; what survived is in the broker (:meth:`records`).
        self.outputs: list[OutgoingMessageEnvelope] = []
        #: The (key, value) bytes of each of :attr:`outputs`.
        self.serialized: list[tuple[Any, Any]] = []
        #: The harness's wall clock, in ms (:meth:`advance_wall_clock`).
        self.wall_clock_ms = wall_clock_ms
        #: The ownership generation: 1, plus one per restart (stamped on changelog records and
        #: checkpoints, as in a job).
        self.generation = 0
        self.state: State = "running"
        #: What stopped the task (a :class:`MessageFailure` or ``window()``'s error), if anything.
        self.failure: BaseException | None = None
        #: Where the task's input is read from (and :meth:`send` appends to): :attr:`broker`
        #: with ``loopback``, else a broker of its own.
        self.input_broker = self.broker if loopback else MemoryBroker()
        self._task = task
        self._crash_points = CrashPoints()
        self._shared = Shared(
            self.job,
            partition,
            base_dir,
            self.registry,
            self.serdes,
            self.producer,
            self.input_broker,
            self._crash_points,
            self.outputs,
            self.serialized,
            lambda: self.wall_clock_ms,
        )
        self._extra_inputs: set[SystemStreamPartition] = set()  # streams sent to, not in task.inputs
        self._send_serdes: dict[SystemStream, tuple[Any, Any]] = {}  # resolved once per stream
        self._restored: tuple[StorageEngine[Any, Any], ...] = ()
        self._start(None, restore=False)

    # ----------------------------------------------------------------- the task's parts
    @property
    def instance(self) -> TaskInstance:
        """The runtime's :class:`TaskInstance` of the current run."""
        return self._taskrun.instance

    @property
    def task(self) -> Any:
        """The user's task object of the current run."""
        return self._taskrun.instance.task

    @property
    def stores(self) -> dict[str, Any]:
        """The task's stores by name, as the task sees them (``get``, ``range``, ``all``...)."""
        return self._taskrun.instance.stores

    @property
    def collector(self) -> RecordingCollector:
        """The task's collector (``serialized``: the bytes of each output)."""
        collector = self._taskrun.instance.collector
        assert isinstance(collector, RecordingCollector)
        return collector

    @property
    def changelogs(self) -> dict[str, BrokerChangelog]:
        """The changelog of each logged store, by store name (``.records``, ``.latest()``)."""
        return self._taskrun.changelogs

    @property
    def coordinator(self) -> Coordinator:
        """The task's coordinator (a requested commit is done right after the call)."""
        return self._taskrun.instance.coordinator

    @property
    def metrics(self) -> MetricsGroup:
        """The task's metrics group (``task.Partition N``; what ``context.metrics`` holds)."""
        return self.registry.group(f"task.{self.task_name}")

    # ----------------------------------------------------------------- start and restart
    def _start(self, checkpoint: TaskCheckpoint | None, *, restore: bool) -> None:
        """Start a run of the task (:class:`~samzapy.testing.run.TaskRun`).

        Its stores (restored to ``checkpoint`` with ``restore``), task object, instance and
        commit, as the container builds them; then ``init``.
        """
        self.generation += 1
        job_inputs = [SystemStreamPartition(s.system, s.stream, self.partition) for s in self.job.inputs]
        inputs = [*job_inputs, *sorted(self._extra_inputs - set(job_inputs), key=str)]
        with self._crash_points.suspended():  # no crash inside a restore (see CrashPoints)
            self._taskrun = TaskRun(
                self._shared,
                self._new_task(),
                inputs,
                checkpoint,
                restore=restore,
                generation=self.generation,
            )
        self.state, self.failure = "running", None
        try:
            self._taskrun.init()  # what init raises reaches the test as it is
        except Exception as exc:
            self.state, self.failure = "failed", exc
            raise

    def _new_task(self) -> Any:
        if isinstance(self._task, type):
            return self._task()
        if isinstance(self._task, str):
            return self.job.task_type()
        return self._task  # an object: the same one again

    @property
    def checkpoint(self) -> TaskCheckpoint | None:
        """The task's checkpoint as a restart reads it from the checkpoint topic.

        ``None``: nothing committed yet.
        """
        fold = CheckpointFold()
        topic = self.job.checkpoint_topic
        for record in self.broker.records(topic, 0):
            fold.add_record(record, topic)
        return fold.checkpoints.get(self.task_name)

    def crash(self, unacknowledged: Unacknowledged = "lose") -> None:
        """Crash the task here, as ``kill -9`` would.

        Nothing more is flushed or written; what the stores' caches held is gone; the records
        the producer had not acknowledged are lost (``unacknowledged="lose"``) or land in the
        broker all the same (``"land"``: the restore must then trim them). The local store files
        stay on disk. Messages sent while the task is down wait in its input for
        :meth:`restart`.

        Raises:
            HarnessError: the task is not running.
        """
        self._require_running("crash()")
        if unacknowledged == "land":
            self.producer.land_unacknowledged()
        else:
            self.producer.lose_unacknowledged()
        self._taskrun.abandon()
        self.state = "crashed"

    def crash_at(self, point: str, *, after: int = 1, unacknowledged: Unacknowledged = "lose") -> None:
        """Crash (:meth:`crash`) the ``after``-th time execution reaches ``point`` from now.

        The crash comes in the middle of whatever the test called (``send``, ``window``,
        ``commit``...), which then returns with the task crashed. The points,
        :data:`samzapy.testing.CRASH_POINTS`: ``after-changelog-send``, ``after-output-send``,
        ``after-producer-flush``, ``after-local-checkpoint`` and ``after-checkpoint-send`` (the
        last three inside a commit, as the container's crash points of those names). A restart's
        restore does not count (its trim writes to the changelog): the subprocess crash tests
        cover restores.
        """
        self._crash_points.arm(point, after, unacknowledged)

    def restart(self) -> None:
        """Start the task again, as a container does after a crash or a stop.

        The stores are restored from their changelogs to the offsets of the last checkpoint (the
        real restore of :mod:`samzapy.stores.restore`: local checkpoint, replay, trim of what
        lies beyond), ``init`` is called on a fresh task object, and the input is read again
        from the checkpointed offsets (every message sent since, in the order sent). A running
        task is stopped cleanly first (a final commit, ``close``).
        """
        if self.state == "closed":
            msg = "restart(): the harness is closed"
            raise HarnessError(msg)
        if self.state == "running":
            self._guarded(lambda: self._taskrun.commit(final=True))
        if self.state in ("running", "stopped", "failed"):
            self._taskrun.close()
            self.producer.flush()  # a clean close flushes the producer
        self._start(self.checkpoint, restore=True)
        self.process_available()

    # ----------------------------------------------------------------- input
    def send(
        self,
        stream: str | SystemStream,
        key: Any,
        message: Any,
        *,
        offset: int | None = None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Deliver one message (already deserialised) to the task.

        It is serialised with the stream's serdes, appended to the task's partition of the
        stream (at ``offset``, by default the next one) and processed by the runtime, with every
        message before it that is still waiting. While the task is crashed or stopped, it only
        waits.

        Raises:
            SerdeError: the key or message does not fit the stream's serde.
            Exception: what ``process`` raised, when the job's error policy stops the task
                (the runtime's text, naming stream, partition and offset, is added as a note).
        """
        system_stream = SystemStream.parse(stream) if isinstance(stream, str) else stream
        key_serde, msg_serde = self._send_serdes.get(system_stream) or self._send_serdes.setdefault(
            system_stream, self.serdes.for_stream(system_stream)
        )
        raw_key = (
            key if key_serde is None or key is None else encode_output(key_serde, key, system_stream, "key")
        )
        raw = (
            message
            if msg_serde is None or message is None
            else encode_output(msg_serde, message, system_stream, "message")
        )
        self.send_raw(system_stream, raw_key, raw, offset=offset, timestamp=timestamp, headers=headers)

    def send_raw(
        self,
        stream: str | SystemStream,
        key: Any,
        value: Any,
        *,
        offset: int | None = None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """As :meth:`send`, with the key and value as they are on the wire.

        The runtime deserialises the bytes: a test of bad input, dead letters, skipped messages.
        """
        system_stream = SystemStream.parse(stream) if isinstance(stream, str) else stream
        ssp = self._input(system_stream)
        self.input_broker.append(
            ssp.stream, ssp.partition, key, value, headers=headers, timestamp=timestamp, offset=offset
        )
        self.process_available()

    def _input(self, stream: SystemStream) -> SystemStreamPartition:
        """The task's partition of ``stream``, made an input of the task if it was not one."""
        ssp = SystemStreamPartition(stream.system, stream.stream, self.partition)
        if ssp not in self._taskrun.instance.input_serdes:
            self._extra_inputs.add(ssp)
            self._taskrun.add_input(ssp, stream)
        return ssp

    def process_available(self) -> int:
        """Process every input record the task has not processed yet, committing where the task asks.

        Returns how many. Another harness over the same broker may have written them. Does
        nothing while the task is not running.

        Records waiting in several inputs (sent while the task was down, re-read after a
        restart, written by another harness) are taken as a job takes a backlog
        (:class:`~samzapy.testing.run.DeliveryOrder`): with ``task.input.order=timestamp``
        (the default) by record timestamp, ties by the stream's place in ``task.inputs``,
        then partition and offset; with ``arrival``, in the order they were sent.
        """
        return self._guarded(self._process_available)

    def _process_available(self) -> int:
        if self.state != "running":
            return 0  # a task that is down reads nothing: its input waits
        error: BaseException | None = None
        done = 0
        try:
            done = self._taskrun.process_available(self.input_broker)
        except MessageFailure as failure:  # as a job: it stops (what came before committed if safe)
            self.failure, self.state = failure, "failed"
            error = _as_raised(failure)
        if error is not None:
            raise error
        if self._taskrun.stopped:
            self.state = "stopped"
        return done

    # ----------------------------------------------------------------- window, commit, time
    def window(self) -> None:
        """Call the task's ``window`` once (a ``WindowableTask``), through the runtime.

        Its outputs are numbered by the harness's wall clock.

        Raises:
            HarnessError: the task is not running.
            Exception: what ``window`` raised (the task is then ``failed``, as a job stops).
        """
        self._require_running("window()")
        self._guarded(self._window)

    def _window(self) -> None:
        error: BaseException | None = None
        try:
            self._taskrun.window()
        except TaskError as failure:  # window() raised, or an async message drained first
            self.failure, self.state = failure, "failed"
            error = _as_raised(failure)
        if error is not None:
            raise error
        if self._taskrun.stopped:
            self.state = "stopped"

    def commit(self) -> None:
        """Commit as the container does (:class:`~samzapy.container.commit.Commit`).

        Flush every store (object caches down to the engine and the changelog), flush the
        producer (every change and output acknowledged), take the local store checkpoints, write
        the checkpoint (input offsets and changelog offsets) to the checkpoint topic.

        Raises:
            HarnessError: the task is not running.
        """
        self._require_running("commit()")
        self._guarded(self._taskrun.commit)

    def advance_wall_clock(self, ms: int) -> None:
        """Move the harness's wall clock on by ``ms`` and do what the run loop does then.

        Call ``window()`` once if ``task.window.ms`` has passed since the last call, then commit
        if ``task.commit.ms`` has passed since the last commit. Nothing happens while the task
        is not running.
        """
        self.wall_clock_ms += ms
        if self.state != "running":
            return
        window_ms = self.job.window_ms
        if window_ms and self.wall_clock_ms - self._taskrun.last_window_ms >= window_ms:
            self.window()
        if (
            self.state == "running"
            and self.wall_clock_ms - self._taskrun.last_commit_ms >= self.job.commit_ms
        ):
            self.commit()

    def advance_event_time(
        self, time_ms: int, *, stream: str | SystemStream | None = None, source: str | None = None
    ) -> None:
        """Send a ``watermark`` control record saying that event time reached ``time_ms``.

        The record (:mod:`samzapy.operators.event_time`) goes to ``stream``, or to every input
        of the task. A task using :class:`~samzapy.operators.event_time.EventTime` moves that
        source's progress, and its watermark with it; ``source`` names an upstream task
        (``watermark.upstream.tasks``), else the input stream is the source. The record is JSON
        (the stream's serde must take a dict).
        """
        self._control(WATERMARK, {"control": "watermark", "watermark": time_ms}, stream, source, time_ms)

    def end_of_stream(self, *, stream: str | SystemStream | None = None, source: str | None = None) -> None:
        """Send an ``end-of-stream`` control record to ``stream`` (or every input of the task).

        That source will send no more, so an event-time task closes what it was holding.
        """
        self._control(END_OF_STREAM, {"control": "end-of-stream"}, stream, source, 0)

    def _control(
        self,
        kind: bytes,
        body: dict[str, Any],
        stream: str | SystemStream | None,
        source: str | None,
        ts: int,
    ) -> None:
        if source is not None:
            body = {**body, "source": source}
        streams = [stream] if stream is not None else list(self.job.inputs)
        for target in streams:
            self.send(target, None, body, headers=[(CONTROL_HEADER, kind)], timestamp=ts)

    # ----------------------------------------------------------------- reading the broker
    def records(self, topic: str | SystemStream, partition: int | None = None) -> list[BrokerRecord]:
        """What :attr:`broker` holds of ``topic``: one partition, or every partition.

        ``topic`` is an output, a changelog, the checkpoint topic; a stream such as
        ``kafka.counts`` or a topic name. Every partition comes in the order the broker took
        them. After a crash these are what survived, with the copies a restart sent again (same
        ids: :func:`samzapy.testing.distinct_by_id` keeps one of each). The input the test sent
        is in :attr:`input_broker`.
        """
        if isinstance(topic, SystemStream):
            name = topic.stream
        else:
            systems = {s.system for s in self.job.inputs} | {"kafka"}
            system, dot, rest = topic.partition(".")
            name = rest if dot and system in systems else topic
        return self.broker.records(name, partition)

    # ----------------------------------------------------------------- restore_stores, close
    def restore_stores(
        self, offsets: dict[str, int | None] | None = None
    ) -> dict[str, StorageEngine[Any, Any]]:
        """Fresh stores rebuilt from what the task's changelogs hold, as after a crash.

        As a container rebuilds them: new engines in a new directory, each restored from a copy
        of its store's changelog (:mod:`samzapy.stores.restore`: replay up to the offset, then
        undo what lies beyond it) to ``offsets[store]``, by default the store's last change
        (``None``: nothing was committed, the store comes back empty).

        Only logged stores are returned: the others have nothing to be restored from. Writes
        still in an object cache were never sent: call :meth:`commit` first to include them.
        The harness's own stores and changelogs are left as they are; :meth:`close` closes the
        restored stores. (:meth:`restart` restores the task's own stores in place.)
        """
        round_dir = self.base_dir / f"restored-{len(self._restored)}"
        restored = restore_copies(self._shared, self.changelogs, offsets or {}, round_dir)
        self._restored = (*self._restored, *restored.values())
        return restored

    def close(self) -> None:
        """Close the task, its stores and the restored stores; remove the temporary directory.

        The task's ``close`` is called if it has one. Nothing is committed.
        """
        if self.state == "closed":
            return
        try:
            if self.state != "crashed":
                self._taskrun.close()
        finally:
            self.state = "closed"
            for store in self._restored:
                store.close()
            if self._tmp is not None:
                self._tmp.cleanup()

    # ----------------------------------------------------------------- helpers
    def _require_running(self, what: str) -> None:
        if self.state != "running":
            msg = f"{what}: the task is {self.state}" + (
                "" if self.state == "closed" else "; restart() starts it again"
            )
            raise HarnessError(msg)

    def _guarded(self, action: Callable[[], T]) -> T | int:
        """Run ``action``; a crash point reached in it crashes the task (and returns 0)."""
        try:
            return action()
        except Crash as crash:
            self.crash(crash.unacknowledged)
            return 0


def _as_raised(failure: BaseException) -> BaseException:
    """What the test sees of a failure that stopped the task.

    The task's own exception (what the old harness raised), with the runtime's text as a note;
    else the failure itself.
    """
    cause = failure.__cause__
    if isinstance(cause, Exception):
        cause.add_note(f"samzapy.testing: the task stopped: {failure}")
        return cause
    return failure

"""The task API, after Samza's: what a user implements and what samzapy hands to it.

A job's ``task.class`` names a class that derives from :class:`StreamTask` and, as it needs,
from :class:`InitableTask`, :class:`WindowableTask` and :class:`ClosableTask`. samzapy makes
one instance per task (one per input partition number) and calls it from one thread.

Example:
    >>> from samzapy import StreamTask, InitableTask
    >>> class MyStatefulTask(StreamTask, InitableTask):
    ...     def init(self, context):
    ...         self.store = context.get_store("my-store")
    ...     def process(self, envelope, collector, coordinator):
    ...         self.store.put(envelope.key, envelope.message)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from samzapy.records import Headers, RecordHeaders
from samzapy.streams import SystemStream, SystemStreamPartition

if TYPE_CHECKING:
    from samzapy.config.app import AppConfig
    from samzapy.config.model import StreamConfig
    from samzapy.stores.base import KeyValueStore
    from samzapy.stores.versioned import VersionedStore


@dataclass(slots=True)
class IncomingMessageEnvelope:
    """One input message, deserialised with the stream's serdes.

    Treat it as read-only. (It is not a frozen dataclass: a frozen one's ``__init__`` sets
    each field through ``object.__setattr__``, four times the cost of this one's, and one is
    built per message.)

    Attributes:
        system_stream_partition: where the message was read.
        offset: its offset in that partition.
        key: the deserialised key (``None`` when the message had none).
        message: the deserialised value.
        timestamp: the Kafka record timestamp in milliseconds.
        size: the size in bytes of the serialised key plus value.
        headers: the Kafka record headers, as (name, value) pairs (a value may be ``None``).
    """

    system_stream_partition: SystemStreamPartition
    offset: int
    key: Any
    message: Any
    timestamp: int = 0
    size: int = 0
    headers: RecordHeaders = field(default_factory=list)

    @property
    def stream(self) -> str:
        """The stream name without the system (``pageviews``)."""
        return self.system_stream_partition.stream

    @property
    def system_stream(self) -> SystemStream:
        """The stream with its system."""
        return self.system_stream_partition.system_stream

    @property
    def partition(self) -> int:
        """The partition number the message was read from."""
        return self.system_stream_partition.partition


@dataclass(slots=True)
class OutgoingMessageEnvelope:
    """A message a task sends, serialised with the output stream's serdes.

    Attributes:
        system_stream: where to send it (``SystemStream("kafka", "out")``; a string
            ``"kafka.out"`` is accepted too).
        key: the key, also used to choose the partition unless ``partition_key`` or
            ``partition`` is given.
        message: the value; ``None`` sends a tombstone.
        partition_key: partition by this value's serialised bytes instead of the key's.
        partition: an explicit partition number, overriding both.
        headers: extra headers; samzapy adds ``samzapy.id``.
        id: a deterministic id for this output; when ``None`` samzapy derives one from
            the task, the input offset and the output's sequence number within that input.
    """

    system_stream: SystemStream | str
    key: Any = None
    message: Any = None
    partition_key: Any = None
    partition: int | None = None
    headers: Headers = field(default_factory=list)
    id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.system_stream, str):
            self.system_stream = SystemStream.parse(self.system_stream)


class MessageCollector(Protocol):
    """Where a task sends its outputs."""

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        """Queue ``envelope`` for sending.

        It is acknowledged by the broker before the next checkpoint is written.
        """


class TaskCoordinator(Protocol):
    """Lets a task ask for a commit or for the container to stop."""

    def commit(self) -> None:
        """Commit (flush stores, flush outputs, checkpoint) after the current call returns."""

    def shutdown(self) -> None:
        """Stop the container (with a final commit) after the current call returns."""


class TaskContext(Protocol):
    """What a task sees of its surroundings in :meth:`InitableTask.init`."""

    @property
    def task_name(self) -> str:
        """The task's name, ``Partition N``."""

    @property
    def partition(self) -> int:
        """The partition number this task consumes of every input stream."""

    @property
    def inputs(self) -> tuple[SystemStream, ...]:
        """The job's input streams (``task.inputs``), in order."""

    @property
    def config(self) -> AppConfig:
        """The job's application keys (outside samzapy's reserved prefixes), read-only.

        With typed getters: ``context.config.get_int("app.threshold", 10)``.
        """

    def stream(self, system_stream: SystemStream) -> StreamConfig:
        """The settings of a stream (``systems.<system>.streams.<stream>.*``)."""

    def get_store(self, name: str) -> KeyValueStore[Any, Any]:
        """The task's instance of the store configured as ``stores.<name>.*``."""

    def get_versioned_store(self, name: str, *, namespace: bytes = b"") -> VersionedStore:
        """Store ``name`` as a versioned table (``stores.<name>.versioned.history.ms`` of history)."""

    @property
    def metrics(self) -> Any:
        """The task's metrics registry (counters and gauges by name)."""


class StreamTask(ABC):
    """A task that processes one message at a time.

    Derive from it and implement :meth:`process`.
    """

    @abstractmethod
    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        """Process one message.

        Raising stops the job (or dead-letters the message, as configured) with the stream,
        partition and offset in the error.
        """


class InitableTask(ABC):  # noqa: B024 - a marker with one optional hook, as in Samza
    """A task that wants its context (stores, config) before the first message."""

    def init(self, context: TaskContext) -> None:  # noqa: B027 - optional hook
        """Called once, after the task's stores are restored and before any message."""


class WindowableTask(ABC):
    """A task called every ``task.window.ms`` milliseconds of wall-clock time."""

    @abstractmethod
    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Do periodic work: emit aggregates, expire entries."""


class ClosableTask(ABC):
    """A task with resources to release when the container stops."""

    @abstractmethod
    def close(self) -> None:
        """Called once at shutdown, after the final commit."""


class AsyncStreamTask(StreamTask):
    """A task whose messages are processed concurrently: implement :meth:`process_async`.

    With ``task.max.concurrency`` N, up to N messages of the task are in flight at once on
    the container's asyncio loop. Messages are spread over N *lanes* by a hash of their key:
    messages of one key are processed one after the other, in offset order; different keys
    run in parallel. The checkpoint never passes the lowest offset still in flight, and a
    commit first waits for every message taken in to finish, so stores stay exact.

    Blocking work (a synchronous client, heavy CPU) belongs in ``await asyncio.to_thread(...)``;
    store reads and writes stay on the loop (stores are not thread-safe). A failed or timed-out
    call is retried (``task.retry.max.attempts``) with exponential backoff: write to stores
    after the steps that may fail, so that a retry does not apply a change twice.

    Example:
        >>> import asyncio
        >>> from samzapy import AsyncStreamTask
        >>> class Enrich(AsyncStreamTask):
        ...     async def process_async(self, envelope, collector, coordinator):
        ...         await asyncio.sleep(0)  # e.g. a call to a remote service
    """

    @abstractmethod
    async def process_async(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        """Process one message.

        Raising (or taking longer than ``task.callback.timeout.ms``) fails the attempt.
        """

    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        """Run :meth:`process_async` to completion (one message at a time: for test drivers).

        The container never calls this: it runs ``process_async`` concurrently.
        """
        import asyncio  # here, not at the top: every command line imports this module

        asyncio.run(self.process_async(envelope, collector, coordinator))

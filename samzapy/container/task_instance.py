"""One task: the user's task object, its stores, its offsets, and its error policy."""

from __future__ import annotations

import logging
import time
from operator import attrgetter
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord

from samzapy.container.collector import TaskCollector
from samzapy.errors import TaskError
from samzapy.metrics import MetricsGroup
from samzapy.streams import SystemStreamPartition
from samzapy.task import ClosableTask, IncomingMessageEnvelope, InitableTask, WindowableTask
from samzapy.user_code import failure_text, log_user_traceback, user_line

log = logging.getLogger(__name__)

#: A counter's value, for C-level sums over the store write counters (once per message).
_VALUE = attrgetter("value")
ERROR_HEADER = "samzapy.error"
SOURCE_HEADER = "samzapy.source"


class MessageFailure(TaskError):
    """A message could not be processed and the job is configured to stop on it.

    ``safe_to_commit`` tells whether the failed call left no trace (no store write, no
    output), so that everything before the message may be committed.
    """

    def __init__(self, text: str, safe_to_commit: bool) -> None:
        super().__init__(text)
        self.safe_to_commit = safe_to_commit


class Coordinator:
    """The :class:`samzapy.task.TaskCoordinator` of one task: records requests."""

    __slots__ = ("commit_requested", "shutdown_requested")

    def __init__(self) -> None:
        self.commit_requested = False
        self.shutdown_requested = False

    def commit(self) -> None:
        """Ask for a commit after the current call."""
        self.commit_requested = True

    def shutdown(self) -> None:
        """Ask the container to stop (with a final commit) after the current call."""
        self.shutdown_requested = True


class ErrorPolicy:
    """What to do with a message that fails: skip it, dead-letter it, or stop (the default)."""

    def __init__(self, job: Any, producer: Any) -> None:
        self.drop_deserialization_errors: bool = job.drop_deserialization_errors
        self.ignored = set(job.ignored_exceptions)
        self.dead_letter = job.dead_letter_stream
        self._producer = producer

    def ignores(self, exc: BaseException) -> bool:
        """Whether ``task.ignored.exceptions`` names this exception (or ``*``)."""
        if "*" in self.ignored:
            return True
        names = {cls.__name__ for cls in type(exc).__mro__}
        names |= {f"{cls.__module__}.{cls.__qualname__}" for cls in type(exc).__mro__}
        return bool(names & self.ignored)

    def dead_letter_send(self, ssp: SystemStreamPartition, record: ConsumerRecord, cause: str) -> None:
        """Send the raw record to the dead-letter stream with the error in its headers."""
        headers = [
            *(record.headers or []),
            (ERROR_HEADER, cause.encode()),
            (SOURCE_HEADER, f"{ssp.system}.{ssp.stream}/{ssp.partition}/{record.offset}".encode()),
        ]
        self._producer.send(self.dead_letter.stream, record.key, record.value, headers=headers)


class TaskInstance:
    """Runs one task: deserialises its messages, calls the task, tracks its offsets."""

    def __init__(
        self,
        task_name: str,
        partition: int,
        task: Any,
        stores: dict[str, Any],
        collector: TaskCollector,
        input_serdes: dict[SystemStreamPartition, tuple[Any, Any]],
        policy: ErrorPolicy,
        metrics: MetricsGroup,
    ) -> None:
        self.task_name = task_name
        self.partition = partition
        self.task = task
        self.stores = stores
        self.collector = collector
        self.coordinator = Coordinator()
        self.input_serdes = input_serdes
        self.offsets: dict[SystemStreamPartition, int] = {}
        self._policy = policy
        self.metrics = metrics
        self._processed = metrics.counter("messages-actually-processed")
        self._process_ns = metrics.counter("process-ns")
        self._skipped = metrics.counter("skipped-messages")
        self._dead_lettered = metrics.counter("dead-lettered")
        self._window_calls = metrics.counter("window-calls")
        self.last_window = time.monotonic()

    def init(self, context: Any) -> None:
        """Call the task's ``init`` if it has one.

        Raises:
            TaskError: ``init`` raised; the message names the task and the user's line.
        """
        if isinstance(self.task, InitableTask) or hasattr(self.task, "init"):
            try:
                self.task.init(context)
            except Exception as exc:
                raise self._user_failure("init() raised", exc) from exc

    def _user_failure(self, what: str, exc: Exception) -> TaskError:
        """A :class:`TaskError` for user code that raised outside a message, its traceback logged."""
        text = f"task {self.task_name}: {failure_text(what, exc)}"
        log_user_traceback(log, text, exc)
        return TaskError(f"{text}. Fix the task (run with -v for the traceback)")

    def process_records(
        self, ssp: SystemStreamPartition, records: list[ConsumerRecord], start: int = 0
    ) -> int:
        """Process ``records[start:]`` of ``ssp`` in order, advancing the task's offset for each.

        Returns the index after the last record processed: processing stops early, right
        after the call that asked for it, when the task requests a commit or a shutdown
        (Samza commits after the current ``process`` call, not after a batch).

        Raises:
            MessageFailure: a record failed and the policy is to stop; the offset stays at
                that record, so nothing after it is processed or committed.
        """
        key_serde, msg_serde = self.input_serdes[ssp]
        key_of = None if key_serde is None else key_serde.from_bytes
        message_of = None if msg_serde is None else msg_serde.from_bytes
        process = self.task.process
        collector = self.collector
        begin = collector.begin
        coordinator = self.coordinator
        offsets = self.offsets
        stream = ssp.stream
        envelope_of = IncomingMessageEnvelope
        # Looked up once per batch, not per message: the store write counters that tell
        # whether a failed call left a trace.
        counters = self._write_counters()
        started = time.perf_counter_ns()
        index, end = start, len(records)
        # The offset after the last record handled, stored once per batch (a dict store per
        # message hashed the frozen SystemStreamPartition each time).
        next_offset = None
        try:
            while index < end:
                record = records[index]
                index += 1
                offset = record.offset
                key, message = record.key, record.value
                try:
                    if key_of is not None and key is not None:
                        key = key_of(key)
                    if message_of is not None and message is not None:
                        message = message_of(message)
                except Exception as exc:
                    self._fail(ssp, record, exc, "could not deserialise", deserialising=True)
                    next_offset = offset + 1
                    continue
                envelope = envelope_of(
                    ssp,
                    offset,
                    key,
                    message,
                    record.timestamp,
                    (record.serialized_key_size or 0) + (record.serialized_value_size or 0),
                    record.headers or [],
                )
                begin(stream, offset)
                writes_before = sum(map(_VALUE, counters)) + collector.sent
                try:
                    process(envelope, collector, coordinator)
                except Exception as exc:
                    traceless = sum(map(_VALUE, counters)) + collector.sent == writes_before
                    self._fail(ssp, record, exc, "process() raised", traceless=traceless)
                next_offset = offset + 1
                if coordinator.commit_requested or coordinator.shutdown_requested:
                    break
        finally:
            if next_offset is not None:
                offsets[ssp] = next_offset
            self._processed.inc(index - start)
            self._process_ns.inc(time.perf_counter_ns() - started)
        return index

    def _write_counters(self) -> list[Any]:
        return [
            counter
            for store in self.stores.values()
            for counter in (store.metrics.counter("puts"), store.metrics.counter("deletes"))
        ]

    def _fail(
        self,
        ssp: SystemStreamPartition,
        record: ConsumerRecord,
        exc: BaseException,
        what: str,
        *,
        deserialising: bool = False,
        traceless: bool = True,
    ) -> None:
        where = f"stream '{ssp.system}.{ssp.stream}' partition {ssp.partition} offset {record.offset}"
        cause = f"{type(exc).__name__}: {exc}"
        policy = self._policy
        if (deserialising and policy.drop_deserialization_errors) or policy.ignores(exc):
            self._skipped.inc()
            log.warning("skipped the message at %s: %s (%s)", where, what, cause)
            return
        if policy.dead_letter is not None:
            policy.dead_letter_send(ssp, record, f"{what}: {cause}")
            self._dead_lettered.inc()
            log.warning("sent the message at %s to %s: %s (%s)", where, policy.dead_letter, what, cause)
            return
        text = f"task {self.task_name}: {what} for the message at {where}: {cause}"
        if not deserialising:
            line = user_line(exc)
            text += f" (at {line})" if line else ""
            log_user_traceback(log, text, exc)
        raise MessageFailure(text, safe_to_commit=deserialising or traceless) from exc

    def window(self) -> None:
        """Call the task's ``window`` (if it is windowable)."""
        if isinstance(self.task, WindowableTask):
            self.collector.begin("window", int(time.time() * 1000))
            try:
                self.task.window(self.collector, self.coordinator)
            except Exception as exc:
                raise self._user_failure("window() raised", exc) from exc
            self._window_calls.inc()
        self.last_window = time.monotonic()

    def flush_stores(self) -> None:
        """Write every store's caches down to the engine and the changelog producer."""
        for store in self.stores.values():
            store.flush()

    def close(self) -> None:
        """Close the task (if closable) and its stores."""
        try:
            if isinstance(self.task, ClosableTask):
                self.task.close()
        finally:
            for store in self.stores.values():
                store.close()

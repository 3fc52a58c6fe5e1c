"""What happens to a message that fails: the one error policy of the sync and async runners.

The rule, in this order (docs/operations.md "Bad messages"):

1. A :class:`~samzapy.errors.StorageFailure` (a store engine failed: IO error, corruption, a
   full or read-only disk), raised or anywhere in the cause chain, is never a message error:
   the task stops, nothing since the last commit is committed (the failed call may have
   written half), and the log names the store, its file and what to do. No skip or
   dead-letter setting changes this: skipping would commit offsets past messages whose
   effects the store lost (issue 21 measured 264 good messages "skipped" on a corrupted
   block).
2. With ``task.dead.letter.stream``, every other failed message goes there (raw, with the
   error in headers), whether or not ``task.ignored.exceptions`` or
   ``task.drop.deserialization.errors`` name it, and is counted (``dead-lettered``). A
   message too large for the dead-letter stream (the producer's ``max.request.size``) goes
   there as a *reference*: source, key, size, error and the first
   :data:`REFERENCE_PREVIEW_BYTES` of the value, flagged with ``samzapy.truncated``; counted
   (``dead-letter-references``) and logged. A poison record never stalls the job.
3. Without one, a message whose failure ``task.ignored.exceptions`` names (or that cannot be
   deserialised, with ``task.drop.deserialization.errors=true``) is skipped, counted
   (``skipped-messages``) and logged.
4. Otherwise the task stops with :class:`MessageFailure`, naming stream, partition, offset
   and cause; ``safe_to_commit`` tells whether what came before the message may be committed
   (the failed call left no trace: no store write, no output).

Thread safety: one policy is shared by the tasks of a container, all on its loop's thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from samzapy.container.fencing import ContainerFenced
from samzapy.errors import StorageFailure, TaskError
from samzapy.kafka.producer import RecordTooLargeError
from samzapy.metrics import MetricsGroup
from samzapy.records import Headers, Record, RecordSink
from samzapy.streams import SystemStreamPartition
from samzapy.user_code import log_user_traceback, user_line

if TYPE_CHECKING:
    from samzapy.config.model import JobConfig

log = logging.getLogger(__name__)

ERROR_HEADER = "samzapy.error"
SOURCE_HEADER = "samzapy.source"
#: On a dead-letter reference: ``true`` (the value is cut to its first bytes, the key too when
#: it is longer than that, and the original headers are left out).
TRUNCATED_HEADER = "samzapy.truncated"
#: On a dead-letter reference: the size of the original key plus value, in bytes.
SIZE_HEADER = "samzapy.size"
#: On a dead-letter reference: why the raw record could not be sent (the producer's error).
REFERENCE_HEADER = "samzapy.reference"
#: How much of the value (and of an oversized key) a dead-letter reference keeps.
REFERENCE_PREVIEW_BYTES = 1024


class MessageFailure(TaskError):
    """A message could not be processed and the job is configured to stop on it.

    ``safe_to_commit`` tells whether the failed call left no trace (no store write, no
    output), so that everything before the message may be committed.
    """

    def __init__(self, text: str, safe_to_commit: bool) -> None:
        super().__init__(text)
        self.safe_to_commit = safe_to_commit


def how_to_go_on(failure: MessageFailure) -> str:
    """How to let the job go on past messages like the one that stopped it.

    A store serde misfit is the task's bug, not bad input: skipping would only lose the update,
    so it is not offered.
    """
    from samzapy.stores.serialized import StoreSerdeError

    cause = type(failure.__cause__).__name__ if failure.__cause__ is not None else "Exception"
    if isinstance(failure.__cause__, StoreSerdeError):
        return (
            "Fix the task, or the store's serde setting the message names (run with -v for the "
            "traceback): the input message is fine, and skipping it would only lose its update"
        )
    if "could not deserialise" in str(failure):
        return (
            "Fix the producer or the stream's serde, or go on past such messages: "
            "task.drop.deserialization.errors=true skips them, "
            "task.dead.letter.stream=kafka.<stream> keeps them aside"
        )
    return (
        f"Fix the task (run with -v for the traceback), or go on past such messages: "
        f"task.ignored.exceptions={cause} skips them, task.dead.letter.stream=kafka.<stream> keeps them aside"
    )


def storage_failure_in(exc: BaseException) -> StorageFailure | None:
    """The :class:`StorageFailure` that ``exc`` is or was caused by, else ``None``.

    Caused through ``__cause__`` or ``__context__``, at any depth.

    >>> storage_failure_in(ValueError("bad")) is None
    True
    >>> try:
    ...     try:
    ...         raise StorageFailure("IO error", store="counts")
    ...     except StorageFailure as inner:
    ...         raise RuntimeError("wrapped") from inner
    ... except RuntimeError as outer:
    ...     storage_failure_in(outer).store
    'counts'
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, StorageFailure):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def storage_failure_advice(failure: StorageFailure) -> str:
    """What a person reads when a store's engine failed: the store, the file, what to do."""
    store = f"store '{failure.store}'" if failure.store else "a store"
    path = failure.path or "its directory under job.logged.store.base.dir"
    return (
        f"{store} failed underneath the task (file: {path}): {failure}. This is a storage "
        f"failure, not a bad message: it is never skipped or dead-lettered, and nothing since "
        f"the last commit is committed. What to do: check the disk holding {path} (free space, "
        f"permissions, a read-only mount, IO errors in the system log); if the store's files are "
        f"damaged, delete that store directory and restart: it is rebuilt from its changelog"
    )


class FailureCounts:
    """A task's counters of messages the policy let go (in the task's metrics group)."""

    __slots__ = ("dead_lettered", "references", "skipped")

    def __init__(self, metrics: MetricsGroup) -> None:
        self.skipped = metrics.counter("skipped-messages")
        self.dead_lettered = metrics.counter("dead-lettered")
        self.references = metrics.counter("dead-letter-references")


class ErrorPolicy:
    """Applies the rule of the module docstring; see :meth:`handle`.

    Args:
        job: the job's config (``drop_deserialization_errors``, ``ignored_exceptions``,
            ``dead_letter_stream``).
        producer: where dead-lettered messages are sent (the container's producer, or a
            replay's sink).
    """

    def __init__(self, job: JobConfig, producer: RecordSink) -> None:
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

    def handle(
        self,
        counts: FailureCounts,
        task_name: str,
        ssp: SystemStreamPartition,
        record: Record,
        exc: BaseException,
        what: str,
        *,
        deserialising: bool = False,
        safe_to_commit: bool = True,
    ) -> None:
        """Dead-letter or skip the failed message (it is then done), or stop.

        ``what`` says what failed ("process() raised"); ``safe_to_commit`` whether, if the
        task stops, what came before the message may be committed (the failed call left no
        trace and nothing else uncommitted is half done).

        Raises:
            MessageFailure: the task must stop (rules 1 and 4); raised from ``exc``.
        """
        if isinstance(exc, ContainerFenced):
            raise exc  # not the message's failure: the container lost its tasks (no skip, no dead letter)
        where = f"stream '{ssp.system}.{ssp.stream}' partition {ssp.partition} offset {record.offset}"
        storage = storage_failure_in(exc)
        if storage is not None:
            text = f"task {task_name}: at the message at {where}: {storage_failure_advice(storage)}"
            raise MessageFailure(text, safe_to_commit=False) from exc
        cause = f"{type(exc).__name__}: {exc}"
        if self.dead_letter is not None:
            self._dead_letter(counts, ssp, record, f"{what}: {cause}", where)
            return
        if (deserialising and self.drop_deserialization_errors) or self.ignores(exc):
            counts.skipped.inc()
            log.warning("skipped the message at %s: %s (%s)", where, what, cause)
            return
        text = f"task {task_name}: {what} for the message at {where}: {cause}"
        if not deserialising:
            line = user_line(exc)
            text += f" (at {line})" if line else ""
            log_user_traceback(log, text, exc)
        raise MessageFailure(text, safe_to_commit=safe_to_commit) from exc

    def _dead_letter(
        self,
        counts: FailureCounts,
        ssp: SystemStreamPartition,
        record: Record,
        cause: str,
        where: str,
    ) -> None:
        try:
            self.dead_letter_send(ssp, record, cause)
        except RecordTooLargeError as too_large:
            self._send_reference(ssp, record, cause, too_large)
            counts.references.inc()
            log.warning(
                "the message at %s (%d bytes) is too large for %s: sent a reference to it there "
                "(source, key, size, error, the first %d bytes of the value; header %s=true): %s",
                where,
                _size(record),
                self.dead_letter,
                REFERENCE_PREVIEW_BYTES,
                TRUNCATED_HEADER,
                cause,
            )
        else:
            log.warning("sent the message at %s to %s: %s", where, self.dead_letter, cause)
        counts.dead_lettered.inc()

    def dead_letter_send(self, ssp: SystemStreamPartition, record: Record, cause: str) -> None:
        """Send the raw record to the dead-letter stream with the error in its headers.

        Raises:
            RecordTooLargeError: the record is larger than the producer accepts.
        """
        # the record's own headers go on as read: one without a value (None) too (the producer
        # sends it through kafka-python's path), which Headers, for what samzapy builds, leaves out
        headers = cast(Headers, [*(record.headers or []), *_error_headers(ssp, record, cause)])
        self._producer.send(self._dead_letter_topic, record.key, record.value, headers=headers)

    @property
    def _dead_letter_topic(self) -> str:
        """The dead-letter stream's topic (asked for only when the policy dead-letters)."""
        assert self.dead_letter is not None, "no dead-letter stream is configured"
        return self.dead_letter.stream

    def _send_reference(
        self, ssp: SystemStreamPartition, record: Record, cause: str, too_large: RecordTooLargeError
    ) -> None:
        key = record.key
        value = record.value
        headers = [
            *_error_headers(ssp, record, cause),
            (TRUNCATED_HEADER, b"true"),
            (SIZE_HEADER, str(_size(record)).encode()),
            (REFERENCE_HEADER, too_large.reason.encode()),
        ]
        self._producer.send(
            self._dead_letter_topic,
            None if key is None else key[:REFERENCE_PREVIEW_BYTES],
            None if value is None else value[:REFERENCE_PREVIEW_BYTES],
            headers=headers,
        )


def _error_headers(ssp: SystemStreamPartition, record: Record, cause: str) -> list[tuple[str, bytes]]:
    source = f"{ssp.system}.{ssp.stream}/{ssp.partition}/{record.offset}"
    return [(ERROR_HEADER, cause.encode()), (SOURCE_HEADER, source.encode())]


def _size(record: Record) -> int:
    return len(record.key or b"") + len(record.value or b"")

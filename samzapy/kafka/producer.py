"""The producer behind every output, changelog and checkpoint write of a container.

:class:`Producer` wraps one kafka-python ``KafkaProducer`` with the guarantees a commit needs:
keyed records land where Kafka's Java client would put them, :meth:`Producer.flush` returns
only when every send was acknowledged and raises if any failed, and :meth:`Producer.acked_offset`
gives the exact offsets the broker assigned (checkpoints record those, see DESIGN.md §10).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from kafka import KafkaProducer
from kafka import errors as kafka_errors
from kafka.producer.future import FutureRecordMetadata

from samzapy.errors import KafkaSystemError
from samzapy.kafka.admin import DEFAULT_DEADLINE_S, attempt_timeout_ms, retry_unreachable
from samzapy.kafka.fast_append import _PLAIN_ABOVE_BYTES as _FAST_PATH_UNCHECKED_BYTES
from samzapy.kafka.fast_append import APPENDED, RECORD_OVERHEAD, FastAppend, acked_last_offset
from samzapy.kafka.fast_path_state import log_fast_paths
from samzapy.kafka.partitioner import partition_for_key

log = logging.getLogger(__name__)

#: samzapy's producer settings; ``overrides`` win. Idempotence keeps retried batches from
#: being written twice and, with at most 5 requests in flight, keeps each partition in order.
DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "retries": 2**31 - 1,
    "linger_ms": 5,
    # Measured on the dev broker: 64 KiB batches produce ~1.5x faster than 16 KiB, while
    # 256 KiB-1 MiB batches are slower again (kafka-python builds batches in Python).
    "batch_size": 64 * 1024,
    "compression_type": None,
    "client_id": "samzapy-producer",
}
#: The bytes of records the producer may hold not yet acknowledged before a send waits for the
#: oldest batches (``buffer.memory``, Kafka's producer key; kafka-python 3.0 has no such bound,
#: so the producer keeps it). Kafka's own default is 32 MiB; 8 MiB keeps a burst of emissions
#: or a commit's changelog from growing the process while still holding far more than the
#: requests in flight (at most 5 per broker of ``max.request.size``, 1 MiB by default).
DEFAULT_BUFFER_BYTES = 8 << 20
#: The property that sets it, as written in a job's config.
BUFFER_MEMORY_KEY = "systems.kafka.producer.buffer.memory"
#: Pending sends are scanned for completion once this many have accumulated (and again when
#: twice as many as are still in flight have).
_COLLECT_EVERY = 20_000
_MAX_FAILURES_SHOWN = 5
#: A send still to be checked: its future, topic, partition, (fast path) the batch whose
#: fate the future stands for, or ``None`` when it stands for its own record only, and the
#: bytes queued through this producer when it was sent (see :meth:`Producer._hold_back`).
_Pending = tuple[FutureRecordMetadata, str, int | None, Any, int]
#: The property that sets the producer's record size limit (kafka-python's ``max_request_size``).
MAX_REQUEST_SIZE_KEY = "systems.kafka.producer.max.request.size"


class RecordTooLargeError(KafkaSystemError):
    """A record is larger than the producer's ``max.request.size``: it cannot be sent at all.

    Attributes:
        topic: where it was to go.
        key: its key (bytes or ``None``).
        size: its size in bytes (key, value and headers).
        limit: the producer's ``max.request.size``.
    """

    def __init__(self, topic: str, partition: int | None, key: bytes | None, size: int, limit: int) -> None:
        where = f"topic '{topic}'" if partition is None else f"topic '{topic}' partition {partition}"
        shown = repr(key if key is None or len(key) <= 60 else key[:60] + b"...")
        super().__init__(
            f"cannot send a record of {size:,} bytes (key {shown}) to {where}: the producer "
            f"accepts at most {limit:,} bytes per record; raise {MAX_REQUEST_SIZE_KEY} (and the "
            f"topic's max.message.bytes on the broker) to send it, or set "
            f"task.drop.producer.errors=true to drop and count such outputs instead of failing"
        )
        self.topic = topic
        self.key = key
        self.size = size
        self.limit = limit

    @property
    def reason(self) -> str:
        """The short form: ``<size> bytes > max.request.size <limit>``."""
        return f"{self.size} bytes > max.request.size {self.limit}"


class FlushTimeout(KafkaSystemError):
    """Sends were not all acknowledged within a flush's timeout.

    They may still be: the broker is slow or unreachable, see :mod:`samzapy.kafka.outage`.
    """

    broker_unreachable = True


class BufferFull(KafkaSystemError):
    """The producer held ``buffer.memory`` bytes unacknowledged for ``max.block.ms``.

    The broker is slow or unreachable (as Kafka's producer, a send then fails).
    """

    broker_unreachable = True


class SendFailed(KafkaSystemError):
    """Sends failed for good (kafka-python gave up on them): waiting will not bring them back."""

    broker_unreachable = False


def producer_settings(bootstrap_servers: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``KafkaProducer`` settings for ``overrides`` on top of :data:`DEFAULTS`.

    Keys may be written Kafka's way (``linger.ms``) or kafka-python's (``linger_ms``); string
    values (as read from a properties file) are converted to the type kafka-python expects.
    """
    settings = dict(DEFAULTS, bootstrap_servers=bootstrap_servers)
    known = KafkaProducer.DEFAULT_CONFIG
    for raw_key, value in (overrides or {}).items():
        key = raw_key.replace(".", "_")
        if key == "buffer_memory":  # samzapy's own (Producer): kafka-python 3.0 has none
            settings[key] = _coerce(raw_key, value, DEFAULT_BUFFER_BYTES)
            continue
        if key not in known:
            msg = f"unknown producer setting '{raw_key}': not a kafka-python KafkaProducer option"
            raise KafkaSystemError(msg)
        settings[key] = _coerce(raw_key, value, known[key])
    return settings


def _coerce(key: str, value: Any, default: Any) -> Any:
    if not isinstance(value, str) or isinstance(default, str) or default is None:
        return value
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false"):
                raise ValueError(value)
            return value.lower() == "true"
        if isinstance(default, int | float):
            number = float(value)
            return int(number) if number.is_integer() and isinstance(default, int) else number
    except ValueError as exc:
        msg = f"invalid value '{value}' for producer setting '{key}': expected a {type(default).__name__}"
        raise KafkaSystemError(msg) from exc
    return value


class SendGuard(Protocol):
    """Says before a send whether it may go out.

    The container's fencing: a passthrough container's
    :class:`samzapy.container.fencing.SendGate`.
    """

    #: The monotonic time until which sends need no :meth:`check`.
    open_until: float

    def check(self) -> None:
        """Raise when no send may go out any more."""


class Producer:
    """Asynchronous sends, with a flush that fails loudly.

    ``send`` queues a record and returns at once. ``flush`` waits until every record sent
    before it is acknowledged (``acks=all``) and raises ``KafkaSystemError`` if any send
    failed, naming topic, partition and cause; once a send has failed every later ``flush``
    raises too, so a failure cannot be flushed away. Keyed records without an explicit
    partition go to :func:`~samzapy.kafka.partitioner.partition_for_key` of the topic's
    partition count (fetched once per topic); key-less ones to the partition kafka-python's
    sticky partitioner picks.

    Implementation: no callback is attached to a send (the hot path is one append to
    kafka-python's record accumulator, see :mod:`samzapy.kafka.fast_append`, or one
    ``KafkaProducer.send``, plus a list append). Sends are kept as ``(future, topic, partition)``
    and scanned for completion at ``flush``, at ``acked_offset`` and whenever the list has
    grown past a threshold, which bounds the memory held by completed sends. What is not yet
    acknowledged is bounded too: a send that starts a batch while more than ``buffer.memory``
    bytes were queued since the oldest unacknowledged send waits for the oldest sends first
    (:meth:`_hold_back`; :class:`BufferFull` after ``max.block.ms``).

    Thread safety: a ``Producer`` belongs to one thread (a container's run loop). kafka-python
    does the network I/O on its own sender thread, but nothing of this class runs there, so
    no locking is needed. Sharing one instance between threads is not supported: give each
    thread its own, or guard every call with one lock.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        overrides: ``KafkaProducer`` settings over :data:`DEFAULTS` (``linger.ms`` or
            ``linger_ms``; strings are converted), and ``buffer.memory`` (default
            :data:`DEFAULT_BUFFER_BYTES`), which this class keeps itself.
        deadline_s: how long an unreachable broker is retried when connecting.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        overrides: dict[str, Any] | None = None,
        *,
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        settings = producer_settings(bootstrap_servers, overrides)
        settings.setdefault("bootstrap_timeout_ms", attempt_timeout_ms(deadline_s))
        buffer_bytes = settings.pop("buffer_memory", DEFAULT_BUFFER_BYTES)
        if not isinstance(buffer_bytes, int) or buffer_bytes <= 0:
            msg = f"invalid value '{buffer_bytes}' for producer setting 'buffer.memory': expected bytes > 0"
            raise KafkaSystemError(msg)
        #: At most this many bytes unacknowledged before a send waits (``buffer.memory``).
        self.buffer_bytes: int = buffer_bytes
        log_fast_paths()
        self._address = bootstrap_servers
        self._producer = retry_unreachable(
            lambda: KafkaProducer(**settings), bootstrap_servers, "connect", deadline_s
        )
        #: The largest record this producer sends, in bytes (``max.request.size``).
        self.max_request_size: int = settings.get(
            "max_request_size", KafkaProducer.DEFAULT_CONFIG["max_request_size"]
        )
        # The fast path leaves the size check to the plain path, which it takes only for
        # records above its threshold: a smaller limit would go unchecked (and the broker may
        # take the record), so such a producer sends every record the plain way.
        small_limit = self.max_request_size <= _FAST_PATH_UNCHECKED_BYTES
        self._fast = None if small_limit else FastAppend.for_producer(self._producer)
        self._counts: dict[str, int] = {}
        self._pending: list[_Pending] = []
        self._collect_at = _COLLECT_EVERY
        self._acked: dict[tuple[str, int], int] = {}
        self._failures: list[tuple[str, int | None, BaseException]] = []  # the first few
        self._failure_count = 0
        self._guard: SendGuard | None = None
        self._plain_bytes = 0  # bytes queued through KafkaProducer.send (the fast path counts its own)
        self._block_s = self._producer.config["max_block_ms"] / 1000

    def guard(self, guard: SendGuard | None) -> None:
        """Ask ``guard`` before every send from now on.

        A send after :attr:`SendGuard.open_until` calls :meth:`SendGuard.check` first, whose
        exception the send raises (a container that lost its tasks stops sending at its first
        send after the takeover is seen, not at its next commit). The cost while the guard is
        open: one clock read per send.
        """
        self._guard = guard

    @property
    def fast_path_active(self) -> bool:
        """Whether this producer appends explicitly partitioned records through the fast path.

        :mod:`samzapy.kafka.fast_append`; :func:`samzapy.kafka.fast_paths` says why not.
        """
        return self._fast is not None

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Queue one record.

        ``value=None`` is a tombstone; ``timestamp_ms`` (default: now) is the record's timestamp
        (``samzapy produce --timestamp-field``).

        Raises:
            RecordTooLargeError: at once when the record is larger than ``max.request.size``.
            KafkaSystemError: at once when the record cannot even be queued (unknown topic
                or partition, buffer full for ``max_block_ms``). Failures while delivering
                are raised by :meth:`flush`.
            Exception: whatever the :meth:`guard` raises (nothing is sent then).
        """
        guard = self._guard
        if guard is not None and time.monotonic() >= guard.open_until:
            guard.check()
        if partition is None and key is not None:
            count = self._counts.get(topic)
            if count is None:
                count = self.partitions_for(topic)
            partition = partition_for_key(key, count)
        try:
            appended = None
            # the fast path stamps records with the time of the append: a given time goes the
            # client's own way
            if partition is not None and self._fast is not None and timestamp_ms is None:
                appended = self._fast.append(topic, partition, key, value, headers)
                if appended is APPENDED:
                    return  # tracked by its batch's first record
            if appended is None:
                appended = (
                    self._producer.send(
                        topic,
                        value=value,
                        key=key,
                        headers=headers,
                        partition=partition,
                        timestamp_ms=timestamp_ms,
                    ),
                    None,
                )
                # the fast path counts its own records
                self._plain_bytes += _record_size(key, value, headers) + RECORD_OVERHEAD
        except kafka_errors.MessageSizeTooLargeError as exc:
            size = _record_size(key, value, headers)
            raise RecordTooLargeError(topic, partition, key, size, self.max_request_size) from exc
        except (kafka_errors.KafkaError, ValueError, TypeError) as exc:
            where = f"topic '{topic}'" if partition is None else f"topic '{topic}' partition {partition}"
            msg = f"cannot send a record to {where} on {self._address}: {exc}"
            raise KafkaSystemError(msg) from exc
        queued = self._queued_bytes()
        pending = self._pending
        pending.append((appended[0], topic, partition, appended[1], queued))
        if queued - pending[0][4] > self.buffer_bytes:
            self._hold_back()
        elif len(pending) >= self._collect_at:
            self._collect()

    def _queued_bytes(self) -> int:
        """Bytes of every record queued through this producer so far (an estimate).

        Keys, values, header values and :data:`~samzapy.kafka.fast_append.RECORD_OVERHEAD`.
        """
        fast = self._fast
        return self._plain_bytes + (0 if fast is None else fast.queued_bytes)

    def _hold_back(self) -> None:
        """Wait until the records held unacknowledged are at most half of ``buffer.memory``.

        Called on a new batch (or plain send) when the records queued since the oldest send
        still pending exceed :attr:`buffer_bytes` (those include some acknowledged since, so
        the estimate errs high). Waits for the oldest sends, one at a time, so that a burst
        of sends (a window operator's emissions, a commit's changelog) is held to the
        buffer instead of growing the process. A failed send counts as done here: its error
        is the next :meth:`flush`'s.

        Raises:
            BufferFull: the oldest send was not done within ``max.block.ms``.
        """
        deadline = time.monotonic() + self._block_s
        low = self.buffer_bytes // 2
        while True:
            self._collect()
            pending = self._pending
            if not pending or self._queued_bytes() - pending[0][4] <= low:
                return
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise kafka_errors.KafkaTimeoutError
                pending[0][0].get(timeout=remaining)
            except kafka_errors.KafkaTimeoutError:
                msg = (
                    f"{self._queued_bytes() - pending[0][4]:,} bytes sent to {self._address} were "
                    f"not acknowledged within max.block.ms ({self._block_s:g} s); the producer "
                    f"holds at most {BUFFER_MEMORY_KEY}={self.buffer_bytes:,} bytes"
                )
                raise BufferFull(msg) from None
            except Exception:  # noqa: BLE001, S110 - a failed send is done: flush() raises it
                pass

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged.

        Raises:
            KafkaSystemError: when a send failed (now or in an earlier flush), or when the
                sends were not all acknowledged within ``timeout_s``.
        """
        try:
            self._producer.flush(timeout=timeout_s)
        except kafka_errors.KafkaTimeoutError as exc:
            self._collect()
            msg = (
                f"{len(self._pending)} records sent to {self._address} were not acknowledged "
                f"within {timeout_s} s"
            )
            raise FlushTimeout(msg) from exc
        self._collect()
        if self._failures:
            raise self._failure_error()

    def acked_offset(self, topic: str, partition: int) -> int | None:
        """The highest offset acknowledged for this producer's sends to a partition.

        The highest offset the broker acknowledged for sends through this producer to
        ``topic``/``partition``, or ``None`` when none was acknowledged yet.

        Exact (from the produce acknowledgements), unlike a broker's reported end offset.
        Call it after :meth:`flush` to cover every send.
        """
        self._collect()
        return self._acked.get((topic, partition))

    def partitions_for(self, topic: str) -> int:
        """The partition count of ``topic`` (asked once, then cached)."""
        try:
            partitions = self._producer.partitions_for(topic)
        except kafka_errors.KafkaError as exc:
            msg = f"cannot find topic '{topic}' on {self._address}: {exc}. Does the topic exist?"
            raise KafkaSystemError(msg) from exc
        if not partitions:
            msg = f"topic '{topic}' has no partitions on {self._address}"
            raise KafkaSystemError(msg)
        count = self._counts[topic] = len(partitions)
        return count

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued and close the connections.

        Does not report failed sends: call :meth:`flush` first when they matter.

        Raises:
            FlushTimeout: records were still unacknowledged after ``timeout_s``.
        """
        try:
            self._producer.close(timeout=timeout_s)
        except kafka_errors.KafkaTimeoutError as exc:
            msg = f"records sent to {self._address} were not acknowledged within {timeout_s} s of closing"
            raise FlushTimeout(msg) from exc

    def _collect(self) -> None:
        """Move completed sends out of the pending list into acked offsets or failures."""
        acked = self._acked
        still: list[_Pending] = []
        for entry in self._pending:
            future = entry[0]
            if not future.is_done:
                still.append(entry)
            elif future.exception is None:
                metadata = future.value
                tp = (metadata.topic, metadata.partition)
                try:
                    offset = acked_last_offset(future, entry[3])
                except KafkaSystemError as exc:
                    self._failed(entry, exc)
                    continue
                if offset > acked.get(tp, -1):
                    acked[tp] = offset
            else:
                self._failed(entry, future.exception)
        self._pending = still
        self._collect_at = max(_COLLECT_EVERY, 2 * len(still))

    def _failed(self, entry: _Pending, exc: BaseException) -> None:
        batch = entry[3]
        self._failure_count += 1 if batch is None else batch.record_count
        if len(self._failures) < _MAX_FAILURES_SHOWN:
            self._failures.append((entry[1], entry[2], exc))

    def _failure_error(self) -> SendFailed:
        failures = self._failures
        shown = "; ".join(
            f"topic '{topic}' partition {'?' if partition is None else partition}: "
            f"{type(exc).__name__}: {exc}"
            for topic, partition, exc in failures
        )
        count = self._failure_count
        more = f" (and {count - len(failures)} more)" if count > len(failures) else ""
        msg = f"{count} record(s) sent to {self._address} were not written: {shown}{more}"
        error = SendFailed(msg)
        error.__cause__ = failures[0][2]
        return error


def _record_size(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]] | None) -> int:
    size = len(key or b"") + len(value or b"")
    return size + sum(len(name) + len(header or b"") for name, header in headers or ())

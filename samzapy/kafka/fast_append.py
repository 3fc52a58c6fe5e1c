"""A cheaper produce path: records appended straight to kafka-python's record accumulator.

``KafkaProducer.send`` spends most of its time on per-record checks that samzapy's records
never need (serializers, header type checks, a size estimate, a debug message whose ``str``
is formatted eagerly, sticky partitioning): measured here 78 -> 34 us per record. What
``send`` does that *matters* is kept, in the same order:

1. the topic's metadata must be known (else the plain ``send`` waits for it);
2. the topic must be registered with the sender's metadata refresh (``Sender.add_topic``).
   This step is the cause of the "batches expired after 120 s" seen with an earlier fast
   path: kafka-python's metadata refresh asks only for registered topics and *replaces* the
   known topics with the answer, so a topic that was only ever appended to directly vanished
   from the metadata at the next refresh (caused, e.g., by the first send to another topic);
   its batches then had no known leader, were never drained, and expired after
   ``delivery_timeout_ms``. ``KafkaProducer.send`` registers a topic through
   ``_wait_on_metadata`` whenever the topic is missing, so it healed on the next send;
3. append to the accumulator, and wake the sender thread when a batch is full or new.

Anything unusual (no explicit partition, a transactional producer, serializers configured,
large records, closed producer, unknown partition) goes through the plain ``send``, which
raises the right errors. This relies on kafka-python internals, so it is enabled only for the
kafka-python versions it was checked against (3.0.x, the range ``pyproject.toml`` pins) and
can be switched off with ``SAMZAPY_PRODUCER_FAST_PATH=0``. Whether it is on, and why not, is
:func:`state` (public through :func:`samzapy.kafka.fast_paths()`, logged once at start).
"""

from __future__ import annotations

import os
import time
from typing import Any

import kafka
from kafka import TopicPartition

from samzapy.errors import KafkaSystemError
from samzapy.kafka import c_builder

#: kafka-python versions whose internals (``_accumulator``, ``_sender``, ``_metadata``) this
#: module was checked against.
SUPPORTED_VERSIONS = ("3.0.",)
#: Records larger than this (key + value + header values) take the plain path, which checks
#: the size against ``max_request_size`` exactly.
_PLAIN_ABOVE_BYTES = 64 * 1024
_REQUIRED = ("_accumulator", "_sender", "_metadata", "_transaction_manager", "_closed", "config")


#: What a record costs in a batch besides its key, value and header values (its framing and
#: the header names), roughly: for the producer's estimate of the bytes it holds.
RECORD_OVERHEAD = 32

#: The name of this fast path in :func:`samzapy.kafka.fast_paths()`.
NAME = "producer-append"


def off_reason() -> str | None:
    """Why the fast path may not be used in this process, or ``None`` when it may."""
    if os.environ.get("SAMZAPY_PRODUCER_FAST_PATH", "1") == "0":
        return "switched off by SAMZAPY_PRODUCER_FAST_PATH=0"
    if not kafka.__version__.startswith(SUPPORTED_VERSIONS):
        return (
            f"kafka-python {kafka.__version__} is not a version it was checked against "
            f"({', '.join(v + 'x' for v in SUPPORTED_VERSIONS)}): every record goes through "
            "KafkaProducer.send, about 4x slower; install the kafka-python range pyproject.toml pins"
        )
    return None


def enabled() -> bool:
    """Whether the fast path may be used: supported kafka-python and not switched off."""
    return off_reason() is None


def on_reason() -> str:
    """What an active fast path runs on, for the start-up log."""
    text = f"kafka-python {kafka.__version__}: records appended to its accumulator directly"
    builder_off = c_builder.off_reason()
    if builder_off is None:
        return text + ", batches built by aiokafka's C builder"
    return text + f"; batches built in Python (C builder off: {builder_off})"


#: What :meth:`FastAppend.append` returns for a record written into a batch that is already
#: tracked by its first record's future (nothing more to track).
APPENDED = object()


class FastAppend:
    """Appends records with an explicit partition straight to a producer's accumulator.

    The first record of a new batch goes through ``RecordAccumulator.append`` (which makes
    the batch and a ``FutureRecordMetadata`` for the record); later records of that batch
    are written into it directly, under the accumulator's lock of the partition, with no
    future of their own: kafka-python completes, fails, retries or expires a batch as a
    whole, so the first record's future tells the fate of them all, and the batch's record
    count gives the last offset (see :meth:`acked_last_offset`). Building a future per
    record (and completing it on the sender thread) was a third of the produce cost.

    ``append`` returns ``None`` when the record must take the plain ``KafkaProducer.send``,
    :data:`APPENDED` when it joined a tracked batch, else ``(future, batch)`` to track
    (``batch`` is ``None`` when the future stands for its record alone). Not thread-safe: one
    per ``Producer``, used by one thread.
    """

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self._accumulator = producer._accumulator
        self._sender = producer._sender
        self._metadata = producer._metadata
        self._tps: dict[tuple[str, int], TopicPartition] = {}
        self._locks: dict[TopicPartition, Any] = {}
        self._tracked: dict[TopicPartition, Any] = {}
        self._c_builder = c_builder.off_reason() is None
        #: Bytes (keys, values, header values, plus :data:`RECORD_OVERHEAD` each) of every
        #: record appended so far: the producer bounds what it holds unacknowledged by it.
        self.queued_bytes = 0

    @classmethod
    def for_producer(cls, producer: Any) -> FastAppend | None:
        """A fast path for ``producer``, or ``None`` when it cannot be used safely."""
        if not enabled() or not all(hasattr(producer, name) for name in _REQUIRED):
            return None
        config = producer.config
        if config.get("key_serializer") or config.get("value_serializer"):
            return None  # samzapy sends bytes; a configured serializer needs the plain path
        if config.get("transactional_id"):
            return None  # partitions must be added to the transaction by send()
        return cls(producer)

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
    ) -> Any:
        """Queue the record; see the class docstring for what is returned."""
        if self._producer._closed or (key is None and value is None):
            return None
        size = (0 if key is None else len(key)) + (0 if value is None else len(value))
        for name, header in headers or ():
            if type(name) is not str or type(header) is not bytes:
                return None  # send() raises the TypeError that names the problem
            size += len(header)
        if size > _PLAIN_ABOVE_BYTES:
            return None
        tp = self._tps.get((topic, partition))
        if tp is None:
            tp = self._register(topic, partition)
            if tp is None:
                return None
        # Step 1 of the module doc, as send() does it: a topic gone from the metadata (deleted,
        # or not yet known) goes through send(), which waits for it.
        if topic not in self._metadata._partitions:
            return None
        if headers is None:
            headers = []
        self.queued_bytes += size + RECORD_OVERHEAD
        tracked = self._tracked.get(tp)
        if tracked is not None:
            full = None
            with self._locks[tp]:
                dq = self._accumulator._batches[tp]
                # Only the newest batch takes records; once drained it is no longer in dq.
                if dq and dq[-1] is tracked and tracked.records.append(None, key, value, headers):
                    tracked.last_append = time.monotonic()
                    # Wake the sender once, when this batch fills (send() wakes it on every
                    # append while an older batch waits: a syscall per record).
                    full = tracked.records.is_full()
            if full is not None:
                if full:
                    self._sender.wakeup()
                return APPENDED
        return self._new_batch(tp, key, value, headers)

    def _new_batch(
        self, tp: TopicPartition, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]
    ) -> Any:
        timestamp_ms = int(time.time() * 1000)  # known, so the C builder can repeat the record
        future, batch_is_full, new_batch, _ = self._accumulator.append(tp, timestamp_ms, key, value, headers)
        batch = None
        if new_batch:
            with self._locks[tp]:
                dq = self._accumulator._batches[tp]
                if dq and dq[-1].produce_future is future._produce_future:
                    batch = dq[-1]
                    if self._c_builder:
                        c_builder.adopt(batch.records, timestamp_ms, key, value, headers)
        if new_batch:
            self._tracked[tp] = batch
        if batch_is_full or new_batch:
            self._sender.wakeup()
        return future, batch

    def _register(self, topic: str, partition: int) -> TopicPartition | None:
        known = self._metadata.partitions_for_topic(topic)
        if known is None or partition not in known:
            return None  # send() waits for the metadata, or raises for an unknown partition
        self._sender.add_topic(topic)  # step 2 of the module doc
        tp = self._tps[(topic, partition)] = TopicPartition(topic, partition)
        self._locks[tp] = self._accumulator._tp_lock(tp)
        return tp


def acked_last_offset(future: Any, batch: Any) -> int:
    """The offset of the last record a tracked, successfully completed batch holds.

    Raises:
        KafkaSystemError: when kafka-python split the batch after ``MESSAGE_TOO_LARGE``: its
            records were re-sent in new batches whose acknowledgements are not tracked here.
    """
    offset = int(future.value.offset)
    if batch is None:
        return offset
    if batch.final_state is None:
        topic, partition = batch.topic_partition
        msg = (
            f"a batch of {batch.record_count} records to topic '{topic}' partition {partition} was "
            "split by kafka-python after MESSAGE_TOO_LARGE; their acknowledgements are unknown. Set "
            "the producer's batch.size below the broker's max.message.bytes"
        )
        raise KafkaSystemError(msg)
    return offset + int(batch.record_count) - 1

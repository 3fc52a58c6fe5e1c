"""An in-memory stand-in for Kafka, for the test driver.

Topics of partitions of records, a producer whose sends are acknowledged only when it is
flushed, and reads by offset.

What it keeps of Kafka's contract, because the runtime relies on it:

* a partition is a log: offsets grow (a sender may give one explicitly, leaving a gap), and a
  reader reads ``start <= offset < stop`` in offset order;
* :class:`MemoryProducer` sends are visible in the log at once but *acknowledged* only by
  :meth:`MemoryProducer.flush` (the commit flushes): :meth:`MemoryProducer.acked_offset` is
  the exact acknowledged offset a checkpoint records, and a crash
  (:meth:`MemoryProducer.lose_unacknowledged`) removes what was never acknowledged, as a
  leader that never wrote them;
* records keep their headers, timestamp and the order in which the broker took them
  (:attr:`BrokerRecord.sequence`, across partitions), so several inputs are read in the
  order they were sent.

It is not a broker: no replication, no compaction, no transactions, one process. Not
thread-safe. A stream without a serde may carry any Python object as key or value (the
harness sends the objects a test gives it as they are).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from samzapy.kafka.partitioner import partition_for_key
from samzapy.kafka.producer import RecordTooLargeError
from samzapy.output_ids import ID_HEADER

#: Records per batch :meth:`MemoryBroker.read` yields (a fetch of a real consumer).
READ_BATCH = 500
#: kafka-python's default ``max.request.size``.
DEFAULT_MAX_REQUEST_SIZE = 1_048_576
_PRODUCER_IDS = itertools.count(1)


class BrokerRecord(NamedTuple):
    """One record of a :class:`MemoryBroker` partition (the fields a consumer sees)."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes]]
    timestamp: int
    #: The order in which the broker took the record, across every topic and partition.
    sequence: int
    #: The :attr:`MemoryProducer.id` of the producer that sent it (``None``: appended directly).
    writer: int | None = None

    @property
    def serialized_key_size(self) -> int:
        """The key's size in bytes (0 when it has none or is not bytes)."""
        return _size(self.key)

    @property
    def serialized_value_size(self) -> int:
        """The value's size in bytes (0 for a tombstone or a value that is not bytes)."""
        return _size(self.value)

    @property
    def id(self) -> str | None:
        """The ``samzapy.id`` header (an output's deterministic id), ``None`` without one."""
        found = None
        for name, value in self.headers:
            if name == ID_HEADER:
                found = value.decode()
        return found


def _size(data: Any) -> int:
    return len(data) if isinstance(data, bytes | bytearray | memoryview) else 0


class PartitionLog:
    """The records of one partition, in offset order (see the module docstring)."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[BrokerRecord] = []
        self._offsets: list[int] = []
        self.end = 0  # the offset the next record gets

    def append(self, record: BrokerRecord) -> None:
        """Add ``record`` at the end (its offset was given by :meth:`MemoryBroker.append`)."""
        self.records.append(record)
        self._offsets.append(record.offset)
        self.end = record.offset + 1

    def index_of(self, offset: int) -> int:
        """The index of the first record at or after ``offset``."""
        return bisect_left(self._offsets, offset)

    def remove(self, doomed: set[int]) -> None:
        """Remove the records at these offsets.

        When they were the tail, their offsets are given out again (Kafka reuses the offsets of
        records a leader never wrote).
        """
        tail = not self.records or max(doomed) >= self.records[-1].offset
        self.records = [r for r in self.records if r.offset not in doomed]
        self._offsets = [r.offset for r in self.records]
        if tail:
            self.end = self.records[-1].offset + 1 if self.records else min(doomed | {self.end})


class MemoryBroker:
    """Topics of partitions of records, in memory: the driver's Kafka (module docstring).

    Also a :class:`~samzapy.records.RecordSource` (``read``, ``end_offset``, ``close``) and
    the admin the output streams ask for partition counts (``partition_count``,
    ``ensure_topic``).

    Args:
        partitions: partition counts of topics known in advance (an output stream's count
            decides which partition a keyed output goes to); other topics are created with
            ``default_partitions`` partitions when first used.
        default_partitions: the partition count of a topic created on first use, and the
            task count a harness assumes when it creates an output stream that has no
            configured partition count (as the container uses the job's task count).
    """

    def __init__(self, partitions: dict[str, int] | None = None, default_partitions: int = 1) -> None:
        self._counts: dict[str, int] = dict(partitions or {})
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._sequence = 0
        self.default_partitions = default_partitions
        #: The largest record timestamp appended so far (0 before any).
        self.latest_timestamp = 0

    # -- topics ----------------------------------------------------------------------------
    def partition_count(self, topic: str) -> int | None:
        """The partition count of ``topic`` (``None``: no such topic yet)."""
        return self._counts.get(topic)

    def ensure_topic(self, topic: str, partitions: int, **_settings: Any) -> int:
        """Create ``topic`` with ``partitions`` partitions when missing; its partition count."""
        return self._counts.setdefault(topic, partitions)

    def topics(self) -> list[str]:
        """Every topic that exists, sorted."""
        return sorted(self._counts)

    def log(self, topic: str, partition: int) -> PartitionLog:
        """The log of ``topic``/``partition`` (created, with its topic, on first use)."""
        found = self._logs.get((topic, partition))
        if found is None:
            count = self._counts.setdefault(topic, self.default_partitions)
            if partition >= count:
                self._counts[topic] = partition + 1  # a test may address any partition
            found = self._logs[topic, partition] = PartitionLog(topic, partition)
        return found

    # -- writing ---------------------------------------------------------------------------
    def append(
        self,
        topic: str,
        partition: int,
        key: Any,
        value: Any,
        *,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp: int = 0,
        offset: int | None = None,
        writer: int | None = None,
    ) -> BrokerRecord:
        """Append a record; ``offset`` (at or after the partition's end) leaves a gap.

        ``writer`` names the producer that sent it.

        Raises:
            ValueError: ``offset`` is below the partition's end (offsets only grow).
        """
        log = self.log(topic, partition)
        if offset is None:
            offset = log.end
        elif offset < log.end:
            msg = (
                f"offset {offset} of {topic}/{partition} is below the partition's end ({log.end}): "
                f"offsets only grow; leave offset out to get the next one"
            )
            raise ValueError(msg)
        record = BrokerRecord(
            topic, partition, offset, key, value, list(headers or []), timestamp, self._sequence, writer
        )
        self._sequence += 1
        self.latest_timestamp = max(self.latest_timestamp, timestamp)
        log.append(record)
        return record

    def now(self) -> int:
        """The timestamp of a record written "now": one ms after the latest one appended.

        What the job itself writes (:meth:`MemoryProducer.send`'s default) and the harness's
        control records carry it, as a job's producer stamps the time of the send: over a
        backlog, a task takes what it wrote (a ``key_by``'s re-keyed records) after the
        records that were there before it, as a job reading a backlog does
        (``task.input.order=timestamp``).
        """
        return self.latest_timestamp + 1

    # -- reading ---------------------------------------------------------------------------
    def records(self, topic: str, partition: int | None = None) -> list[BrokerRecord]:
        """The records of ``topic`` (one partition, or all of them in the order the broker took them)."""
        if partition is not None:
            return list(self.log(topic, partition).records) if (topic, partition) in self._logs else []
        found = [r for (t, _), log in self._logs.items() if t == topic for r in log.records]
        return sorted(found, key=lambda r: r.sequence)

    def read(self, tp: tuple[str, int], start: int, stop: int | None = None) -> Iterator[list[BrokerRecord]]:
        """Batches of the records of ``tp`` (topic, partition), in offset order.

        Records with ``start <= offset < stop`` (``None``: to the end).
        """
        log = self.log(*tp)
        at = log.index_of(start)
        end = len(log.records) if stop is None else log.index_of(stop)
        for first in range(at, end, READ_BATCH):
            yield log.records[first : min(first + READ_BATCH, end)]

    def end_offset(self, tp: tuple[str, int]) -> int:
        """The offset the next record of ``tp`` gets (0: empty)."""
        return self.log(*tp).end

    def close(self) -> None:
        """Nothing to release."""


def distinct_by_id(records: Iterable[BrokerRecord]) -> dict[str, BrokerRecord]:
    """The records by ``samzapy.id``, the first copy of each.

    What a consumer that drops duplicates by id (``samzapy.operators.Deduplicator``) keeps after
    a crash re-sent some.

    Raises:
        ValueError: a record has no id, or two copies of one id differ in key or value (the
            task is not deterministic: a consumer could not tell them apart safely).
    """
    kept: dict[str, BrokerRecord] = {}
    for record in records:
        record_id = record.id
        if record_id is None:
            msg = f"{record.topic}/{record.partition} offset {record.offset} has no samzapy.id header"
            raise ValueError(msg)
        first = kept.setdefault(record_id, record)
        if (first.key, first.value) != (record.key, record.value):
            msg = (
                f"two records with id {record_id!r} differ: {first.topic}/{first.partition} offset "
                f"{first.offset} and offset {record.offset}"
            )
            raise ValueError(msg)
    return kept


class MemoryProducer:
    """The container's producer over a :class:`MemoryBroker`: a :class:`~samzapy.records.RecordSink`.

    A send lands in the log at once, unacknowledged; :meth:`flush` acknowledges everything
    sent (there is no network to wait for). :meth:`lose_unacknowledged` is what a crash does
    to them. A record larger than ``max_request_size`` (key plus value bytes) is refused at
    ``send`` with :class:`~samzapy.kafka.producer.RecordTooLargeError`, as the real one does.

    Args:
        broker: where records go.
        max_request_size: ``systems.kafka.producer.max.request.size``.
        autoflush: acknowledge every send at once (for logs that stand alone, e.g. a copied
            changelog a restore trims).
    """

    def __init__(
        self,
        broker: MemoryBroker,
        *,
        max_request_size: int = DEFAULT_MAX_REQUEST_SIZE,
        autoflush: bool = False,
    ) -> None:
        self.broker = broker
        #: Stamped on every record it sends (:attr:`BrokerRecord.writer`).
        self.id = next(_PRODUCER_IDS)
        self.max_request_size = max_request_size
        self.autoflush = autoflush
        self._unacked: list[BrokerRecord] = []
        self._acked: dict[tuple[str, int], int] = {}
        self._round_robin = 0
        #: The last record sent (the collector reads the id it was given).
        self.last_sent: BrokerRecord | None = None

    def send(
        self,
        topic: str,
        key: Any,
        value: Any,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
    ) -> None:
        """Send one record (``value=None``: a tombstone).

        ``partition=None`` picks one as Kafka's default partitioner does (by key hash, else
        round robin); ``timestamp`` (default: :meth:`MemoryBroker.now`, as a producer stamps the
        time of the send).

        Raises:
            RecordTooLargeError: key plus value is larger than ``max_request_size``.
        """
        size = _size(key) + _size(value)
        if size > self.max_request_size:
            raise RecordTooLargeError(topic, partition, key, size, self.max_request_size)
        if partition is None:
            count = self.broker.partition_count(topic) or self.broker.ensure_topic(
                topic, self.broker.default_partitions
            )
            if isinstance(key, bytes):
                partition = partition_for_key(key, count)
            else:
                partition, self._round_robin = self._round_robin % count, self._round_robin + 1
        stamp = self.broker.now() if timestamp is None else timestamp
        record = self.broker.append(
            topic, partition, key, value, headers=headers, timestamp=stamp, writer=self.id
        )
        self.last_sent = record
        self._unacked.append(record)
        if self.autoflush:
            self.flush()

    def flush(self, timeout_s: float | None = None) -> None:
        """Acknowledge every record sent so far."""
        for record in self._unacked:
            self._acked[record.topic, record.partition] = record.offset
        self._unacked = []

    @property
    def unacknowledged(self) -> list[BrokerRecord]:
        """The records sent since the last flush."""
        return list(self._unacked)

    def acked_offset(self, topic: str, partition: int) -> int | None:
        """The last offset of ``topic``/``partition`` this producer had acknowledged (``None``: none)."""
        return self._acked.get((topic, partition))

    def partitions_for(self, topic: str) -> int:
        """The partition count of ``topic`` (created with the broker's default when missing)."""
        return self.broker.partition_count(topic) or self.broker.ensure_topic(
            topic, self.broker.default_partitions
        )

    def lose_unacknowledged(self) -> list[BrokerRecord]:
        """Remove from the broker every record sent since the last flush, and return them.

        As a crash before the leader wrote them.
        """
        lost, self._unacked = self._unacked, []
        by_log: dict[tuple[str, int], set[int]] = {}
        for record in lost:
            by_log.setdefault((record.topic, record.partition), set()).add(record.offset)
        for (topic, partition), offsets in by_log.items():
            self.broker.log(topic, partition).remove(offsets)
        return lost

    def land_unacknowledged(self) -> list[BrokerRecord]:
        """Keep every record sent since the last flush in the broker, unacknowledged; return them.

        As a crash after the leader wrote them, before the acknowledgement came back.
        """
        landed, self._unacked = self._unacked, []
        return landed

    def close(self, timeout_s: float | None = None) -> None:
        """Nothing to release."""


if TYPE_CHECKING:  # mypy checks that the driver's clients are the runtime's seams
    from samzapy.records import Record, RecordSink, RecordSource

    def _seams(broker: MemoryBroker, producer: MemoryProducer, record: BrokerRecord) -> None:
        source: RecordSource = broker
        sink: RecordSink = producer
        read: Record = record
        del source, sink, read

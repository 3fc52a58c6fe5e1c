"""A store's changelog: one partition of a compacted Kafka topic, written through the job's
producer and read back (to its true end) for restore."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, Protocol

from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from samzapy.checkpoint import generation_header
from samzapy.crashpoints import crash_point
from samzapy.kafka.reading import end_offset, read_partition, reader_consumer

log = logging.getLogger(__name__)


class ChangelogWriter(Protocol):
    """Where a logged store sends its changes: a key and its new value (``None``: tombstone)."""

    def send(self, key: bytes, value: bytes | None) -> None:
        """Send one change (asynchronously; it is acknowledged when the producer is flushed)."""


class KafkaChangelog:
    """The changelog partition of one store of one task.

    Writes go through the job's shared producer (``send`` is asynchronous; the container
    flushes the producer at commit). Reads use a consumer of their own, created on first use
    and closed by :meth:`close_reader` once restore is done.

    :meth:`offset` is the changelog offset the store state reflects: the producer's exact
    acknowledged offset when this process wrote to the partition, else what restore learnt.
    """

    def __init__(
        self, topic: str, partition: int, producer: Any, bootstrap_servers: str, generation: int | None = None
    ) -> None:
        self.topic = topic
        # Every record carries the writer's ownership generation: readers skip a zombie's
        # (samzapy.checkpoint.ChangelogFence). None: no header (tools, tests).
        self._headers = None if generation is None else generation_header(generation)
        self.partition = partition
        self.producer = producer
        self.bootstrap_servers = bootstrap_servers
        self._tp = TopicPartition(topic, partition)
        self._consumer: Any = None
        self._known_offset: int | None = None

    def send(self, key: bytes, value: bytes | None) -> None:
        """Send one change to the changelog partition (``None`` value: a tombstone)."""
        if self._headers is None:
            self.producer.send(self.topic, key, value, partition=self.partition)
        else:
            self.producer.send(self.topic, key, value, partition=self.partition, headers=self._headers)
        crash_point("after-changelog-send")

    def _reader(self) -> Any:
        if self._consumer is None:
            self._consumer = reader_consumer(self.bootstrap_servers)
        return self._consumer

    def read(self, start: int, stop: int | None = None) -> Iterator[list[ConsumerRecord]]:
        """Batches of records from offset ``start`` up to ``stop`` (exclusive) or the true end."""
        yield from read_partition(self._reader(), self._tp, start, stop)

    def end_offset(self) -> int:
        """The true end offset (last offset + 1; 0 when empty).

        The broker's reported end is only a lower bound on the dev broker (see
        ``samzapy.kafka.reading``), so the last record batch is read to find the real end.
        """
        consumer = self._reader()
        reported = end_offset(consumer, self._tp)
        if reported == 0:
            return 0
        last = reported - 1
        for batch in read_partition(consumer, self._tp, reported - 1):
            last = batch[-1].offset
        return last + 1

    def offset(self) -> int | None:
        """The changelog offset of the last change the store reflects (``None``: none)."""
        acked = self.producer.acked_offset(self.topic, self.partition)
        if acked is None:
            return self._known_offset
        if self._known_offset is None:
            return acked
        return max(acked, self._known_offset)

    def set_known_offset(self, offset: int | None) -> None:
        """Record the offset restore brought the store to."""
        self._known_offset = offset

    def close_reader(self) -> None:
        """Close the restore consumer (a later read opens a new one)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __repr__(self) -> str:
        return f"KafkaChangelog({self.topic!r}, {self.partition})"

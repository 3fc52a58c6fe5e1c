"""A store's changelog: the protocols the store layers and the restore rely on, the Kafka
changelog (one partition of a compacted topic, written through the job's producer and read
back to its true end for restore), and the discarding one.

Two protocols, so that code asks for what it uses rather than probing attributes:

* :class:`ChangelogWriter` (``send``): what the logged layer writes to. Any object with it
  will do (the Spark replay discards, tests collect).
* :class:`RestorableChangelog`: a writer that can also be read back (``read``, ``end_offset``)
  and knows the offset the store reflects. Only a store whose changelog is restorable is
  restored and gets local checkpoints: :class:`KafkaChangelog` in a job,
  :class:`~samzapy.stores.memory_changelog.InMemoryChangelog` in tests.

The shared changelogs for the cases that must not write: :meth:`KafkaChangelog.read_only`
(standbys, tools, checks: a send raises :class:`ChangelogWriteRefused`, or is dropped with
``discard_writes=True``) and :class:`DiscardingChangelog` (a writer that drops every change).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from kafka import TopicPartition  # type: ignore[import-untyped]

from samzapy.checkpoint import generation_header
from samzapy.crashpoints import crash_point
from samzapy.errors import StoreError
from samzapy.kafka.reading import end_offset, read_partition, reader_consumer

log = logging.getLogger(__name__)


class ChangelogRecord(Protocol):
    """One record read back from a changelog: kafka-python's ``ConsumerRecord`` and
    :class:`~samzapy.kafka.fast_decode.RawRecord` are ones."""

    offset: int
    key: bytes | None
    value: bytes | None


@runtime_checkable
class ChangelogWriter(Protocol):
    """Where a logged store sends its changes: a key and its new value (``None``: tombstone)."""

    def send(self, key: bytes, value: bytes | None) -> None:
        """Send one change (asynchronously; it is acknowledged when the producer is flushed)."""


@runtime_checkable
class RestorableChangelog(ChangelogWriter, Protocol):
    """A changelog partition a store can be restored from (see :mod:`samzapy.stores.restore`).

    ``send`` writes a change (the restore's trim writes go there too); ``read`` and
    ``end_offset`` read the partition back; ``offset`` is the offset of the last change the
    store reflects (what a commit checkpoints), ``set_known_offset`` tells it where a restore
    left the store; ``close_reader`` releases what reading holds.
    """

    topic: str
    partition: int

    def read(self, start: int, stop: int | None = None) -> Iterator[Sequence[ChangelogRecord]]:
        """Batches of records from offset ``start`` up to ``stop`` (exclusive) or the true end."""

    def end_offset(self) -> int:
        """The true end offset (last offset + 1; 0 when empty)."""

    def offset(self) -> int | None:
        """The changelog offset of the last change the store reflects (``None``: none)."""

    def set_known_offset(self, offset: int | None) -> None:
        """Record the offset a restore brought the store to."""

    def close_reader(self) -> None:
        """Release the reading resources (a later read opens them again)."""


class ChangelogWriteRefused(StoreError):
    """Something tried to write to a changelog opened read-only (a bug: readers never write)."""


class KafkaChangelog:
    """The changelog partition of one store of one task.

    Writes go through the job's shared ``producer`` (``send`` is asynchronous; the container
    flushes the producer at commit). Reads use a consumer of their own, created on first use
    and closed by :meth:`close_reader` once restore is done.

    :meth:`offset` is the changelog offset the store state reflects: the producer's exact
    acknowledged offset when this process wrote to the partition, else what restore learnt.

    ``producer=None`` opens the partition read-only (:meth:`read_only`): a send raises
    :class:`ChangelogWriteRefused`, or, with ``discard_writes=True``, is dropped and counted in
    :attr:`discarded` (to see what a restore yields without touching the changelog: the
    restore's trim writes are lost, so never use that for a store a job goes on with).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        producer: Any,
        bootstrap_servers: str,
        *,
        discard_writes: bool = False,
        generation: int | None = None,
    ) -> None:
        self.topic = topic
        # Every record carries the writer's ownership generation: readers skip a zombie's
        # (samzapy.checkpoint.ChangelogFence). None: no header (tools, tests).
        self._headers = None if generation is None else generation_header(generation)
        self.partition = partition
        self.producer = producer
        self.bootstrap_servers = bootstrap_servers
        self.discard_writes = discard_writes
        self.discarded = 0
        self._tp = TopicPartition(topic, partition)
        self._consumer: Any = None
        self._known_offset: int | None = None

    @classmethod
    def read_only(
        cls, topic: str, partition: int, bootstrap_servers: str, *, discard_writes: bool = False
    ) -> KafkaChangelog:
        """The partition opened for reading only (standbys, tools, checks); see the class doc."""
        return cls(topic, partition, None, bootstrap_servers, discard_writes=discard_writes)

    def send(self, key: bytes, value: bytes | None) -> None:
        """Send one change to the changelog partition (``None`` value: a tombstone)."""
        producer = self.producer
        if producer is None:
            self._refuse()
            return
        if self._headers is None:
            producer.send(self.topic, key, value, partition=self.partition)
        else:
            producer.send(self.topic, key, value, partition=self.partition, headers=self._headers)
        crash_point("after-changelog-send")

    def _refuse(self) -> None:
        if self.discard_writes:
            self.discarded += 1
            return
        msg = f"{self!r} is open read-only: nothing may write to it here (a bug, please report it)"
        raise ChangelogWriteRefused(msg)

    def _reader(self) -> Any:
        if self._consumer is None:
            self._consumer = reader_consumer(self.bootstrap_servers, raw_records=True)
        return self._consumer

    def read(self, start: int, stop: int | None = None) -> Iterator[list[Any]]:
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
        acked: int | None = None
        if self.producer is not None:
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


class DiscardingChangelog:
    """A changelog writer that drops every change, counting them in :attr:`sent`.

    For a store that keeps its logged layer (so it behaves as in streaming: the same layers,
    the same coalescing) but must not send each write: the Spark replay publishes the final
    state once, at its end; benchmarks measure the layers without a broker. Not restorable.
    """

    def __init__(self) -> None:
        self.sent = 0

    def send(self, key: bytes, value: bytes | None) -> None:
        """Drop the change (counted)."""
        self.sent += 1

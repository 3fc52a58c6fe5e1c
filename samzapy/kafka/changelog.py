"""The Kafka changelog of a store.

One partition of a compacted topic, written through the job's producer and read back to its true
end for restore.

The store side of a changelog (the protocols the store layers and the restore rely on, the
discarding writer) lives in :mod:`samzapy.stores.changelog` and knows nothing of Kafka;
:class:`KafkaChangelog` is the :class:`~samzapy.stores.changelog.RestorableChangelog` a job
gives its stores. :meth:`KafkaChangelog.read_only` opens one for the cases that must not write
(standbys, tools, checks).
"""

from __future__ import annotations

from collections.abc import Iterator

from samzapy.checkpoint import generation_header
from samzapy.crashpoints import crash_point
from samzapy.kafka.source import KafkaRecordSource
from samzapy.records import Headers, Record, RecordSink, TopicPartition
from samzapy.stores.changelog import ChangelogWriteRefused


class KafkaChangelog:
    """The changelog partition of one store of one task.

    Writes go through the job's shared ``producer`` (``send`` is asynchronous; the container
    flushes the producer at commit). Reads use a consumer of their own, created on first use
    and closed by :meth:`close_reader` once restore is done.

    :meth:`offset` is the changelog offset the store state reflects: the producer's exact
    acknowledged offset when this process wrote to the partition, else what restore learnt.

    ``producer=None`` opens the partition read-only (:meth:`read_only`): a send raises
    :class:`~samzapy.stores.changelog.ChangelogWriteRefused`, or, with ``discard_writes=True``,
    is dropped and counted in :attr:`discarded` (to see what a restore yields without touching
    the changelog: the restore's trim writes are lost, so never use that for a store a job goes
    on with).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        producer: RecordSink | None,
        bootstrap_servers: str,
        *,
        discard_writes: bool = False,
        generation: int | None = None,
    ) -> None:
        self.topic = topic
        # Every record carries the writer's ownership generation: readers skip a zombie's
        # (samzapy.checkpoint.ChangelogFence). None: no header (tools, tests).
        self._headers: Headers | None = None if generation is None else generation_header(generation)
        self.partition = partition
        self.producer = producer
        self.bootstrap_servers = bootstrap_servers
        self.discard_writes = discard_writes
        self.discarded = 0
        self._tp = TopicPartition(topic, partition)
        self._source = KafkaRecordSource(bootstrap_servers, raw_records=True)
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

    def read(self, start: int, stop: int | None = None) -> Iterator[list[Record]]:
        """Batches of records from offset ``start`` up to ``stop`` (exclusive) or the true end."""
        yield from self._source.read(self._tp, start, stop)

    def end_offset(self) -> int:
        """The true end offset (last offset + 1; 0 when empty); see :meth:`KafkaRecordSource.end_offset`."""
        return self._source.end_offset(self._tp)

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
        self._source.close()

    def __repr__(self) -> str:
        return f"KafkaChangelog({self.topic!r}, {self.partition})"

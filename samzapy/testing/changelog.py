"""The test driver's changelog.

A store's changelog partition in a :class:`MemoryBroker`, written through the driver's producer,
as :class:`~samzapy.stores.changelog.KafkaChangelog` is in a job.

A send lands in the broker unacknowledged until the commit flushes the producer; a crash
drops what was not acknowledged (or lets it land), and the restart's restore
(:mod:`samzapy.stores.restore`) reads the partition back to the checkpointed offset and
trims what lies beyond it, exactly as over Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from samzapy.checkpoint import generation_header
from samzapy.stores.memory_changelog import latest_state
from samzapy.testing.broker import BrokerRecord, MemoryBroker, MemoryProducer


class BrokerChangelog:
    """One store's changelog partition in a :class:`MemoryBroker`.

    A :class:`~samzapy.stores.changelog.RestorableChangelog`.

    Besides the protocol: :attr:`entries` (the records with their offsets), :attr:`records`
    (the (key, value) pairs in order, ``None`` a tombstone), :meth:`latest` (what a restore to
    the end rebuilds) and :meth:`copy` (an independent changelog to restore from).

    Args:
        topic: the changelog topic (``stores.<store>.changelog``).
        partition: the task's partition.
        producer: the driver's producer (the commit flushes it).
        generation: the writer's ownership generation, a header on every record (as in a job).
        on_send: called after every send (the driver's in-process crash point
            ``after-changelog-send``).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        producer: MemoryProducer,
        *,
        generation: int | None = None,
        on_send: Callable[[], None] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.producer = producer
        self._headers = None if generation is None else generation_header(generation)
        self._on_send = on_send
        self._known_offset: int | None = None

    @property
    def broker(self) -> MemoryBroker:
        """The broker holding the partition."""
        return self.producer.broker

    def send(self, key: bytes, value: bytes | None) -> None:
        """Send one change through the producer (acknowledged at the next commit)."""
        self.producer.send(self.topic, key, value, partition=self.partition, headers=self._headers)
        if self._on_send is not None:
            self._on_send()

    def read(self, start: int, stop: int | None = None) -> Iterator[list[BrokerRecord]]:
        """Batches of the records with ``start <= offset < stop`` (``None``: to the end)."""
        return self.broker.read((self.topic, self.partition), start, stop)

    def end_offset(self) -> int:
        """The offset the next record gets (0 when nothing was ever sent)."""
        return self.broker.end_offset((self.topic, self.partition))

    def offset(self) -> int | None:
        """The offset of the last change the store reflects.

        The last one the producer had acknowledged, or where a restore left the store (the
        greater).
        """
        acked = self.producer.acked_offset(self.topic, self.partition)
        if acked is None or self._known_offset is None:
            return acked if acked is not None else self._known_offset
        return max(acked, self._known_offset)

    def set_known_offset(self, offset: int | None) -> None:
        """Record the offset a restore brought the store to."""
        self._known_offset = offset

    def close_reader(self) -> None:
        """Nothing to release."""

    @property
    def entries(self) -> list[BrokerRecord]:
        """Every record of the partition, in offset order."""
        return self.broker.records(self.topic, self.partition)

    @property
    def records(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) of the partition, in order (``None``: a tombstone)."""
        return [(r.key, r.value) for r in self.entries]

    def latest(self) -> dict[bytes, bytes]:
        """The last value per key, tombstones removed: what a restore to the end yields."""
        return latest_state(self.records)

    def copy(self) -> BrokerChangelog:
        """An independent changelog with the same records and offsets.

        It lives in a broker of its own whose sends are acknowledged at once (restoring from it
        leaves this one as it is).
        """
        broker = MemoryBroker({self.topic: self.partition + 1})
        for record in self.entries:
            broker.append(
                self.topic,
                self.partition,
                record.key,
                record.value,
                headers=record.headers,
                offset=record.offset,
            )
        broker.log(self.topic, self.partition).end = self.end_offset()
        return BrokerChangelog(self.topic, self.partition, MemoryProducer(broker, autoflush=True))

    def __repr__(self) -> str:
        return f"BrokerChangelog({self.topic!r}, {self.partition}, {len(self.entries)} records)"


if TYPE_CHECKING:  # mypy checks that it is the store's seam
    from samzapy.stores.changelog import RestorableChangelog

    def _seam(changelog: BrokerChangelog) -> RestorableChangelog:
        return changelog

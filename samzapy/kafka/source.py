"""Reading partitions from Kafka.

:class:`KafkaRecordSource`, a :class:`~samzapy.records.RecordSource` over one consumer of its
own.
"""

from __future__ import annotations

from collections.abc import Iterator

from samzapy.kafka.consumer import Consumer
from samzapy.kafka.reading import end_offset, read_partition, reader_consumer
from samzapy.records import Record, TopicPartition


class KafkaRecordSource:
    """The records of any partition of the cluster at ``bootstrap_servers``, read to their true end.

    See :mod:`samzapy.kafka.reading`.

    The consumer is created on first use and closed by :meth:`close` (a later read opens a
    new one). ``raw_records``: the records carry only offset, key, value and headers (cheaper,
    for restores). One thread at a time: a source is one consumer.
    """

    def __init__(self, bootstrap_servers: str, *, raw_records: bool = False) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._raw = raw_records
        self._consumer: Consumer | None = None

    def _reader(self) -> Consumer:
        if self._consumer is None:
            self._consumer = reader_consumer(self.bootstrap_servers, raw_records=self._raw)
        return self._consumer

    def read(self, tp: TopicPartition, start: int, stop: int | None = None) -> Iterator[list[Record]]:
        """Batches of the records of ``tp`` from ``start`` up to ``stop`` (exclusive) or the true end."""
        yield from read_partition(self._reader(), tp, start, stop)

    def end_offset(self, tp: TopicPartition) -> int:
        """The true end offset of ``tp`` (last offset + 1; 0 when empty).

        The broker's reported end is only a lower bound on the dev broker (see
        :mod:`samzapy.kafka.reading`), so the last record batch is read to find the real end.
        """
        consumer = self._reader()
        reported = end_offset(consumer, tp)
        if reported == 0:
            return 0
        last = reported - 1
        for batch in read_partition(consumer, tp, reported - 1):
            last = batch[-1].offset
        return last + 1

    def close(self) -> None:
        """Close the consumer (a later read opens a new one)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

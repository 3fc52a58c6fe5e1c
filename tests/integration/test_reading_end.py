"""``read_partition`` reads to the true end of a partition from any start, without waiting
out an empty poll when the fetch response tells the end (the dev broker's ListOffsets
reports only the last batch's base offset + 1)."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer, TopicPartition

from samzapy.kafka.reading import end_offset, read_partition, reader_consumer

pytestmark = pytest.mark.integration


def produce_batches(broker: str, topic: str, sizes: list[int]) -> None:
    """One record batch of each size (linger long enough to batch, flush in between)."""
    producer = KafkaProducer(bootstrap_servers=broker, linger_ms=200)
    n = 0
    for size in sizes:
        for _ in range(size):
            producer.send(topic, b"v%d" % n, partition=0)
            n += 1
        producer.flush()
    producer.close()


def offsets(broker: str, topic: str, start: int) -> list[int]:
    consumer = reader_consumer(broker)
    try:
        return [r.offset for b in read_partition(consumer, TopicPartition(topic, 0), start) for r in b]
    finally:
        consumer.close()


def test_every_start_reads_exactly_the_records_after_it(broker: str, topic_name: str) -> None:
    produce_batches(broker, topic_name, [25, 7])
    consumer = reader_consumer(broker)
    reported = end_offset(consumer, TopicPartition(topic_name, 0))
    consumer.close()
    assert 0 < reported <= 32  # a lower bound of the true end (the dev broker undercounts)

    for start in (0, 1, 24, 25, 26, reported - 1, reported, 31, 32):
        assert offsets(broker, topic_name, start) == list(range(start, 32)), start


def test_records_appended_after_a_read_are_found_by_the_next_one(broker: str, topic_name: str) -> None:
    consumer = reader_consumer(broker)
    tp = TopicPartition(topic_name, 0)
    produce_batches(broker, topic_name, [3])
    position = 0
    seen: list[bytes] = []
    for round_ in range(4):
        produce_batches(broker, topic_name, [4])
        for batch in read_partition(consumer, tp, position):
            seen += [r.value for r in batch]
            position = batch[-1].offset + 1
        assert position == 3 + 4 * (round_ + 1)
    consumer.close()

    assert seen == [b"v%d" % n for n in range(3)] + [b"v0", b"v1", b"v2", b"v3"] * 4

"""samzapy.kafka.consumer.Consumer takes samzapy's own partition ids (samzapy.records).

kafka-python checks ``isinstance(p, kafka.TopicPartition)`` in ``seek``, ``pause`` and others;
the rooms outside samzapy/kafka/ pass samzapy.records.TopicPartition. No broker is needed: a
consumer with a fixed ``api_version`` does not connect until it fetches.
"""

from __future__ import annotations

from collections.abc import Iterator

import kafka
import pytest

from samzapy.kafka.consumer import Consumer, kafka_partition
from samzapy.records import TopicPartition

UNREACHABLE = "127.0.0.1:1"


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    client = Consumer(
        bootstrap_servers=UNREACHABLE, api_version=(2, 5), group_id=None, enable_auto_commit=False
    )
    try:
        yield client
    finally:
        client.close()


def test_samzapy_partition_ids_equal_kafka_pythons_and_find_their_entries() -> None:
    ours, theirs = TopicPartition("clicks", 3), kafka.TopicPartition("clicks", 3)
    assert ours == theirs
    assert {theirs: 7}[ours] == 7
    assert type(kafka_partition(ours)) is kafka.TopicPartition
    assert kafka_partition(theirs) is theirs


def test_plain_kafka_consumer_refuses_samzapy_partition_ids() -> None:
    plain = kafka.KafkaConsumer(bootstrap_servers=UNREACHABLE, api_version=(2, 5), enable_auto_commit=False)
    try:
        plain.assign([kafka.TopicPartition("clicks", 0)])
        with pytest.raises(TypeError):
            plain.seek(TopicPartition("clicks", 0), 5)
    finally:
        plain.close()


def test_consumer_assigns_seeks_pauses_and_resumes_samzapy_partitions(consumer: Consumer) -> None:
    first, second = TopicPartition("clicks", 0), TopicPartition("clicks", 1)
    consumer.assign([first, second])
    assert consumer.assignment() == {first, second}
    assert {type(tp) for tp in consumer.assignment()} == {kafka.TopicPartition}
    consumer.seek(first, 5)
    assert consumer.highwater(first) is None  # nothing fetched yet
    consumer.pause(first)
    assert consumer.paused() == {first}
    consumer.resume(first)
    assert consumer.paused() == set()

"""The producer's fast path (records appended straight to kafka-python's accumulator)."""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from support import partition_records

from samzapy.errors import KafkaSystemError
from samzapy.kafka import FastPath, fast_paths
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import read_partition, reader_consumer

pytestmark = pytest.mark.integration


def test_fast_path_keeps_its_topics_through_metadata_refreshes(broker: str, topic_name: str) -> None:
    # The cause of the batches that expired after 120 s with an earlier fast path: a send to a
    # new topic refreshes the metadata, which then held only the registered topics, so the
    # fast path's topic lost its leader and its batches were never sent.
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(first, 2)
        admin.ensure_topic(second, 1)
    values = [str(i).encode().rjust(500, b"-") for i in range(400)]  # several 64 KiB batches
    producer = Producer(broker)
    try:
        assert producer.fast_path_active
        for value in values[:200]:
            producer.send(first, b"k", value, partition=1)
        producer.send(second, b"k", b"other", partition=0)  # refreshes the metadata
        for value in values[200:]:
            producer.send(first, b"k", value, partition=1)
        producer.flush(timeout_s=30)
        assert first in producer._producer._metadata._topics
        assert producer.acked_offset(first, 1) == 399
        assert producer.acked_offset(second, 0) == 0
    finally:
        producer.close()
    assert [r.value for r in partition_records(broker, first, 1)] == values
    assert [r.value for r in partition_records(broker, second, 0)] == [b"other"]


def test_fast_path_sends_headers_and_tombstones(broker: str, topic_name: str) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 1)
    producer = Producer(broker)
    try:
        producer.send(topic_name, b"a", b"1", partition=0, headers=[("samzapy.id", b"x:1")])
        producer.send(topic_name, b"a", None, partition=0)
        producer.flush(timeout_s=30)
    finally:
        producer.close()
    consumer = reader_consumer(broker)
    try:
        records = [r for b in read_partition(consumer, TopicPartition(topic_name, 0), 0) for r in b]
    finally:
        consumer.close()
    assert [(r.key, r.value, list(r.headers)) for r in records] == [
        (b"a", b"1", [("samzapy.id", b"x:1")]),
        (b"a", None, []),
    ]


def test_bad_records_take_the_plain_path_and_its_errors(broker: str, topic_name: str) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 1)
    producer = Producer(broker)
    try:
        with pytest.raises(KafkaSystemError, match="headers"):
            producer.send(topic_name, b"a", b"1", partition=0, headers=[("h", "not bytes")])  # type: ignore[list-item]
        with pytest.raises(KafkaSystemError, match=f"topic '{topic_name}' partition 7"):
            producer.send(topic_name, b"a", b"1", partition=7)
    finally:
        producer.close()


def test_fast_path_can_be_switched_off(broker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMZAPY_PRODUCER_FAST_PATH", "0")
    assert fast_paths()[0] == FastPath(
        "producer-append", False, "switched off by SAMZAPY_PRODUCER_FAST_PATH=0"
    )
    producer = Producer(broker)
    try:
        assert not producer.fast_path_active
    finally:
        producer.close()


def test_the_pinned_kafka_python_has_the_fast_path() -> None:
    # Fails (not skips) on a kafka-python outside the pinned range: there every record would
    # go through KafkaProducer.send, about 4x slower.
    state = fast_paths()[0]
    assert state.name == "producer-append"
    assert state.active, state.reason

"""TopicAdmin and Producer against the dev broker."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest
from support import partition_records

from samzapy.errors import KafkaSystemError
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.partitioner import partition_for_key
from samzapy.kafka.producer import Producer, producer_settings

pytestmark = pytest.mark.integration


def test_ensure_topic_creates_a_compacted_topic_once(
    broker: str, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="samzapy.kafka.admin")
    with TopicAdmin(broker) as admin:
        assert admin.partition_count(topic_name) is None
        assert admin.ensure_topic(topic_name, 3, compact=True) == 3
        assert admin.partition_count(topic_name) == 3
        assert admin.ensure_topic(topic_name, 3, compact=True, expect_partitions=3) == 3
        # an existing topic is left as it is when no count is expected
        assert admin.ensure_topic(topic_name, 8) == 3
    # The dev broker's DescribeConfigs answers nothing (DESIGN.md §10), so the policy cannot be
    # read back here; the creation log says what was requested, and it is logged once.
    created = [r.getMessage() for r in caplog.records if r.getMessage().startswith("created topic")]
    assert created == [f"created topic '{topic_name}' with 3 partitions (compacted)"]


def test_ensure_topic_reports_a_partition_count_mismatch_with_both_counts(
    broker: str, topic_name: str
) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 2)
        with pytest.raises(KafkaSystemError) as raised:
            admin.ensure_topic(topic_name, 4, compact=True, expect_partitions=4)
    text = str(raised.value)
    assert f"topic '{topic_name}'" in text
    assert "has 2 partitions but 4 are expected" in text
    assert "Delete the topic" in text


def test_delete_topic(broker: str, topic_name: str) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 1)
        assert admin.delete_topic(topic_name) is True
        assert admin.partition_count(topic_name) is None
        assert admin.delete_topic(topic_name) is False


def test_unreachable_broker_is_retried_with_warnings_then_reported(caplog: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{dev_broker.free_port()}"
    with caplog.at_level(logging.WARNING, logger="samzapy.kafka.admin"):
        with pytest.raises(KafkaSystemError, match=f"broker at {address} did not answer"):
            TopicAdmin(address, deadline_s=1.5)
    warnings = [r.getMessage() for r in caplog.records if r.name == "samzapy.kafka.admin"]
    assert warnings and all(address in w and "retrying" in w for w in warnings)


def test_keyed_records_land_where_javas_partitioner_puts_them(broker: str, topic_name: str) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 4)
    producer = Producer(broker)
    try:
        for i in range(10_000):
            producer.send(topic_name, f"user-{i % 1500}".encode(), f"v{i}".encode())
        producer.flush()
        acked = {p: producer.acked_offset(topic_name, p) for p in range(4)}
    finally:
        producer.close()
    per_partition: Counter[int] = Counter()
    values = set()
    for partition in range(4):
        records = partition_records(broker, topic_name, partition)
        assert all(partition_for_key(r.key, 4) == partition for r in records)
        assert [r.offset for r in records] == list(range(len(records)))
        assert acked[partition] == records[-1].offset
        per_partition[partition] = len(records)
        values.update(r.value for r in records)
    assert sum(per_partition.values()) == 10_000
    assert len(values) == 10_000
    assert min(per_partition.values()) > 1500  # the keys spread over all partitions


def test_headers_tombstones_and_explicit_partitions_pass_through(broker: str, topic_name: str) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 2)
    producer = Producer(broker)
    try:
        assert producer.acked_offset(topic_name, 1) is None
        producer.send(topic_name, b"k", b"v", partition=1, headers=[("samzapy.id", b"p0-17-0"), ("x", b"")])
        producer.send(topic_name, b"k", None, partition=1)
        producer.send(topic_name, None, b"no key", partition=1)
        producer.flush()
        assert producer.acked_offset(topic_name, 1) == 2
        assert producer.acked_offset(topic_name, 0) is None
    finally:
        producer.close()
    first, tombstone, keyless = partition_records(broker, topic_name, 1)
    assert (first.key, first.value, list(first.headers)) == (
        b"k",
        b"v",
        [("samzapy.id", b"p0-17-0"), ("x", b"")],
    )
    assert (tombstone.key, tombstone.value) == (b"k", None)
    assert (keyless.key, keyless.value) == (None, b"no key")


def test_send_to_a_partition_that_does_not_exist_raises_at_once(broker: str, topic_name: str) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 2)
    producer = Producer(broker)
    try:
        with pytest.raises(KafkaSystemError, match=f"topic '{topic_name}' partition 7"):
            producer.send(topic_name, b"k", b"v", partition=7)
        producer.flush()  # nothing was queued, nothing failed
    finally:
        producer.close()


def test_flush_raises_when_sends_fail_and_keeps_raising(tmp_path: Path) -> None:
    """A broker that dies with records in flight: flush names topic, partition and cause."""
    info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp_path)
    stopped = False
    try:
        with TopicAdmin(info.bootstrap_servers) as admin:
            admin.ensure_topic("doomed", 2)
        producer = Producer(
            info.bootstrap_servers,
            {"request.timeout.ms": "500", "delivery.timeout.ms": "1500", "reconnect_backoff_max_ms": 200},
        )
        producer.send("doomed", b"a", b"1", partition=0)
        producer.flush()
        dev_broker.stop(tmp_path)
        stopped = True
        producer.send("doomed", b"b", b"2", partition=1)
        with pytest.raises(
            KafkaSystemError, match=r"1 record\(s\) sent to .* were not written: topic 'doomed' partition 1"
        ):
            producer.flush(timeout_s=30)
        with pytest.raises(KafkaSystemError, match="not written"):
            producer.flush(timeout_s=30)
        producer.close(timeout_s=1)
    finally:
        if not stopped:
            dev_broker.stop(tmp_path)


def test_producer_settings_accept_kafka_style_keys_and_strings() -> None:
    settings = producer_settings("h:1", {"linger.ms": "20", "enable.idempotence": "false", "acks": "1"})
    assert settings["linger_ms"] == 20
    assert settings["enable_idempotence"] is False
    assert settings["bootstrap_servers"] == "h:1"
    with pytest.raises(KafkaSystemError, match="unknown producer setting 'lingr.ms'"):
        producer_settings("h:1", {"lingr.ms": "5"})
    with pytest.raises(KafkaSystemError, match="invalid value 'soon' for producer setting 'linger.ms'"):
        producer_settings("h:1", {"linger.ms": "soon"})

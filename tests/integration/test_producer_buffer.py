"""The producer's bound on what it holds unacknowledged (``buffer.memory``)."""

from __future__ import annotations

from typing import Any

import pytest
from support import partition_records

from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.producer import BufferFull, Producer

pytestmark = pytest.mark.integration


def _held_bytes(producer: Producer) -> int:
    """The bytes of every batch kafka-python holds not yet acknowledged (its own figures)."""
    accumulator: Any = producer._producer._accumulator
    return sum(batch.records.size_in_bytes() for batch in accumulator._incomplete.all())


def test_a_burst_of_sends_is_held_to_the_buffer(broker: str, topic_name: str) -> None:
    # 3,000 records of ~1 KB to two partitions as fast as Python makes them (a window
    # operator's emissions at end-of-stream): the producer never holds more than its buffer
    # plus the batches being filled, and every record arrives once, in order.
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 2)
    buffer = 256 * 1024
    batch = 64 * 1024
    values = [str(i).encode().rjust(1000, b"-") for i in range(3000)]
    producer = Producer(broker, {"buffer.memory": str(buffer), "batch.size": batch})
    assert producer.buffer_bytes == buffer
    worst = 0
    try:
        for i, value in enumerate(values):
            producer.send(topic_name, b"k", value, partition=i % 2, headers=[("samzapy.id", b"%d" % i)])
            worst = max(worst, _held_bytes(producer))
        producer.flush(timeout_s=60)
        assert producer.acked_offset(topic_name, 0) == 1499
        assert producer.acked_offset(topic_name, 1) == 1499
    finally:
        producer.close()
    # The buffer, plus the batch being filled per partition (checked when a batch starts),
    # plus a batch for the estimate's error (it counts records, kafka-python counts batches).
    # Without the bound the same sends held 3.0 MB at worst on the dev broker.
    assert 0 < worst <= buffer + 3 * batch
    assert [r.value for r in partition_records(broker, topic_name, 0)] == values[0::2]
    assert [r.value for r in partition_records(broker, topic_name, 1)] == values[1::2]


def test_a_send_fails_when_the_buffer_stays_full_for_max_block_ms(broker: str, topic_name: str) -> None:
    # Batches linger 30 s and the buffer is 1 KiB: the second partition's first record finds
    # the first partition's batch unacknowledged and waits for it, at most max.block.ms.
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic_name, 2)
    settings = {"buffer.memory": "1024", "linger.ms": "30000", "max.block.ms": "200"}
    producer = Producer(broker, settings)
    try:
        producer.send(topic_name, b"k", b"x" * 2000, partition=0)
        with pytest.raises(BufferFull, match=r"not acknowledged within max.block.ms \(0.2 s\)"):
            producer.send(topic_name, b"k", b"y" * 2000, partition=1)
    finally:
        producer.close(timeout_s=60)

"""On the dev broker, consumers with the C batch decoder read exactly what kafka-python's own
decoder reads: the same records, offsets, keys, values, headers and timestamps, across
batch boundaries, from starts inside batches, with compressed batches mixed in."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from samzapy.kafka import fast_decode, fast_paths
from samzapy.kafka.fast_decode import DecodedPartitionRecords
from samzapy.kafka.reading import read_partition, reader_consumer

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _c_decoder_installed() -> None:
    """Fail, not skip, when the C decoder is off: the pinned aiokafka ships it."""
    state = fast_paths()[1]
    assert state.active, state.reason


def produce(broker: str, topic: str, start: int, count: int, **settings: object) -> None:
    producer = KafkaProducer(bootstrap_servers=broker, linger_ms=50, **settings)
    for n in range(start, start + count):
        key = None if n % 11 == 0 else b"k%d" % (n % 97)
        value = None if n % 13 == 0 and key is not None else b"value-%d" % n
        headers = [("n", str(n).encode())] if n % 4 == 0 else []
        producer.send(topic, value=value, key=key, headers=headers, partition=0, timestamp_ms=1_000 + n)
        if n % 250 == 0:
            producer.flush()  # batch boundaries at known places
    producer.flush()
    producer.close()


def read(broker: str, topic: str, start: int, *, c_decoder: bool) -> list[tuple]:
    consumer = reader_consumer(broker, c_decoder=c_decoder)
    try:
        tp = TopicPartition(topic, 0)
        return [
            (r.offset, r.key, r.value, r.headers, r.timestamp, r.serialized_value_size)
            for batch in read_partition(consumer, tp, start)
            for r in batch
        ]
    finally:
        consumer.close()


def test_same_records_as_kafka_pythons_decoder(broker: str, topic_name: str) -> None:
    produce(broker, topic_name, 0, 1_200)
    produce(broker, topic_name, 1_200, 300, compression_type="gzip")  # kafka-python decodes these
    produce(broker, topic_name, 1_500, 500, enable_idempotence=True)

    for start in (0, 1, 249, 251, 1_199, 1_350, 1_999):
        fast = read(broker, topic_name, start, c_decoder=True)
        assert fast == read(broker, topic_name, start, c_decoder=False), start
        assert [r[0] for r in fast] == list(range(start, 2_000))
    sample = read(broker, topic_name, 1_512, c_decoder=True)[0]
    assert sample == (1_512, b"k57", b"value-1512", [("n", b"1512")], 2_512, 10)


def test_the_reader_consumer_uses_the_c_decoder(broker: str, topic_name: str) -> None:
    produce(broker, topic_name, 0, 10)
    consumer = reader_consumer(broker)
    try:
        assert consumer._fetcher.PartitionRecords is fast_decode.partition_records
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        parsed: list[object] = []
        real = fast_decode.partition_records

        def spy(*args: object, **kwargs: object) -> object:
            parsed.append(real(*args, **kwargs))
            return parsed[-1]

        consumer._fetcher.PartitionRecords = spy
        records: list = []
        for _ in range(20):
            records += consumer.poll(timeout_ms=500).get(tp, [])
            if len(records) >= 10:
                break
        assert [r.value for r in records] == [b"value-%d" % n for n in range(10)]
        assert parsed and all(isinstance(p, DecodedPartitionRecords) for p in parsed)
    finally:
        consumer.close()
    assert not hasattr(KafkaConsumer, "PartitionRecords")  # nothing patched globally

"""The partitioner agrees with Kafka's Java DefaultPartitioner."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from samzapy.kafka.partitioner import RoundRobin, murmur2, partition_for_key

# From Kafka's own tests (clients/.../common/utils/UtilsTest.java, testMurmur2): Java's
# signed 32-bit results.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def _as_java_int(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafkas_java_vectors(key: bytes, expected: int) -> None:
    assert _as_java_int(murmur2(key)) == expected


def test_partition_is_the_positive_hash_modulo_partitions() -> None:
    # toPositive(-790332482) = 1357151166; % 4 = 2, % 7 = 3
    assert partition_for_key(b"foobar", 4) == 2
    assert partition_for_key(b"foobar", 7) == 1357151166 % 7
    assert partition_for_key(b"abc", 10) == 479470107 % 10


def test_murmur2_agrees_with_kafka_python_on_random_keys_of_every_tail_length() -> None:
    rng = random.Random(20240501)
    for length in range(0, 67):
        for _ in range(30):
            key = rng.randbytes(length)
            assert murmur2(key) == kafka_python_murmur2(key), key


def test_partition_for_key_is_stable_and_in_range() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        key = rng.randbytes(rng.randint(0, 40))
        partition = partition_for_key(key, 12)
        assert 0 <= partition < 12
        assert partition_for_key(bytes(key), 12) == partition


def test_round_robin_cycles_through_partitions() -> None:
    rr = RoundRobin()
    assert [rr.next_partition(3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert rr.next_partition(2) == 1

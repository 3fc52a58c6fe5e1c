"""The partitioner's cached path gives exactly the partition of the Python murmur2."""

from __future__ import annotations

import random

import pytest

from samzapy.kafka import partitioner
from samzapy.kafka.partitioner import murmur2, partition_for_key


def _slow(key: bytes, partitions: int) -> int:
    """Kafka's rule with no cache: ``toPositive(murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def test_cached_partitions_equal_murmur2_over_random_keys_and_partition_counts() -> None:
    rng = random.Random(32)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(3_000)]
    keys += [f"user-{rng.randrange(10**6)}".encode() for _ in range(3_000)]
    for partitions in (1, 3, 4, 7, 64, 1000):
        for _ in range(2):  # the first pass fills the cache, the second reads it
            assert [partition_for_key(k, partitions) for k in keys] == [_slow(k, partitions) for k in keys]


def test_partitions_stay_exact_when_the_cache_empties(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitioner, "_HASHES", {})
    monkeypatch.setattr(partitioner, "_HASHES_MAX", 5)
    keys = [b"k%d" % i for i in range(23)]
    for key in keys * 3:
        assert partition_for_key(key, 12) == _slow(key, 12)
        assert len(partitioner._HASHES) <= 5

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


def _reference_murmur2(key: bytes) -> int:
    """Kafka's ``Utils.murmur2`` written out plainly (no word cache), as an unsigned int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = 0x9747B28C ^ len(key)
    whole = len(key) & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = key[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


def test_murmur2_with_its_word_cache_equals_the_plain_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random and same-shaped keys, with the word cache emptied many times on the way."""
    monkeypatch.setattr(partitioner, "_MIXED", {})
    monkeypatch.setattr(partitioner, "_MIXED_MAX", 50)
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(2_000)]
    keys += [f"user-{rng.randrange(10**6)}".encode() for _ in range(2_000)]
    for _ in range(2):  # the second pass reads the words the first left in the cache
        assert [murmur2(k) for k in keys] == [_reference_murmur2(k) for k in keys]
        assert len(partitioner._MIXED) <= 50
    assert murmur2(b"21") == 3321034988  # Kafka's UtilsTest (-973932308 as a Java int)

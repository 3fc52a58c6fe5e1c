"""Which partition a record goes to: the same answer as Kafka's Java client.

A keyed record goes to ``(murmur2(key) & 0x7fffffff) % num_partitions``, the rule of Kafka's
``DefaultPartitioner`` (``Utils.toPositive(Utils.murmur2(key)) % numPartitions``). Matching it
exactly matters: a Java producer, a Samza job and samzapy must agree on where a key lives,
or a task would not find the state of its keys.

>>> partition_for_key(b"foobar", 4)  # murmur2 is -790332482 in Java
2
>>> murmur2(b"21")  # Kafka's UtilsTest: -973932308 as a signed Java int
3321034988
"""

from __future__ import annotations

import struct

__all__ = ["RoundRobin", "murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS: dict[int, struct.Struct] = {}


def _words(count: int) -> struct.Struct:
    layout = _WORDS.get(count)
    if layout is None:
        layout = _WORDS[count] = struct.Struct(f"<{count}I")
    return layout


#: Each 4-byte word's mixed value (``k * m``, ``k ^ k >> 24``, ``k * m``: a function of the
#: word alone), emptied when full. Keys of one kind share most of their words ("user",
#: "-123"), so a key's words are mostly found here: a dict look-up each instead of three
#: multiplications (~30 % of the hash of a short key that no cache has seen). At most
#: ~1.5 MB.
_MIXED: dict[int, int] = {}
_MIXED_MAX = 1 << 14


def murmur2(key: bytes) -> int:
    """MurmurHash2 (32-bit, seed ``0x9747b28c``) as Kafka computes it, as an unsigned int.

    Java's result is the same 32 bits read as a signed ``int``.
    """
    length = len(key)
    h = _SEED ^ length
    whole = length & ~3
    if whole:
        mixed = _MIXED
        for word in _words(whole >> 2).unpack_from(key):
            k = mixed.get(word)
            if k is None:
                if len(mixed) >= _MIXED_MAX:
                    mixed.clear()
                k = (word * _M) & _MASK
                k ^= k >> 24
                k = mixed[word] = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= key[whole + 2] << 16
        if tail >= 2:
            h ^= key[whole + 1] << 8
        h = ((h ^ key[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


#: Positive hashes of recent keys (keys repeat: users, ads, sessions). A plain dict, emptied
#: when full, costs a third of an ``lru_cache`` per hit; this is on every keyed send. A hash
#: serves every partition count, so one entry per key is exact for all topics. (Neither
#: kafka-python nor aiokafka ships murmur2 in C: a key seen for the first time costs the
#: Python hash, ~0.8 us.)
_HASHES: dict[bytes, int] = {}
_HASHES_MAX = 1 << 16


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``num_partitions``."""
    positive = _HASHES.get(key)
    if positive is None:  # inline: a call less per new key (window results' keys rarely repeat)
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        positive = _HASHES[key] = murmur2(key) & 0x7FFFFFFF
    return positive % num_partitions


class RoundRobin:
    """Partitions for records without a key: 0, 1, 2, ... wrapping around.

    Kafka's own producer spreads key-less records with a "sticky" partitioner (one partition
    per batch); any spread is within its contract. This one is deterministic, which makes
    tests and replays reproducible.
    """

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def next_partition(self, num_partitions: int) -> int:
        """The next partition in turn among ``num_partitions``."""
        partition = self._next % num_partitions
        self._next = partition + 1
        return partition

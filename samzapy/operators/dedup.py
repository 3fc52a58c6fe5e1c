"""Consumer-side deduplication by output id.

A store of seen ids, Bloom filters in front, and time-bucketed garbage collection (Dataflow's
exactly-once sink, after seed 003).

Store layout (one ``KeyValueStore[bytes, bytes]``, under ``namespace``):

* ``ns + 0x00 'di' + id`` -> ``bucket start``: the seen ids;
* ``ns + 0x00 'db' + bucket start + id`` -> ``b""``: the ids of each time bucket, so a whole
  bucket is dropped with one range scan and the Bloom filters are rebuilt from it;
* ``ns + 0x00 'dm'`` -> the largest time seen (the GC horizon never goes back).
"""

from __future__ import annotations

import hashlib
import math
import struct

from samzapy.metrics import MetricsGroup
from samzapy.operators.dedup_layout import BUCKETS_TAG, IDS_TAG, MAX_TAG, DedupLayout
from samzapy.operators.key_encoding import MAX_MS, MIN_MS, decode_ms, encode_ms, prefix_end
from samzapy.stores.base import KeyValueStore

_HEADER = struct.Struct(">QI")


def state_layout(namespace: bytes = b"") -> DedupLayout:
    """The state layout of a :class:`Deduplicator`'s store.

    How the store of a :class:`Deduplicator` with ``namespace`` reads as data and moves in a
    reshard, for a task's ``state_layouts``
    (:class:`~samzapy.operators.dedup_layout.DedupLayout`: ids, their buckets and the largest
    time; the ids are copied to every new task that may receive the old task's keys).
    """
    return DedupLayout(namespace)


class BloomFilter:
    """A Bloom filter over bytes: no false negatives, false positives at about the rate it was sized for.

    ``k`` bit positions come from the two 64-bit halves of one BLAKE2b digest
    (Kirsch-Mitzenmacher double hashing).

    >>> bf = BloomFilter.for_capacity(1000, 0.01)
    >>> bf.add(b"a")
    >>> b"a" in bf, BloomFilter.from_bytes(bf.to_bytes()).num_hashes == bf.num_hashes
    (True, True)
    """

    __slots__ = ("num_bits", "num_hashes", "bits")

    def __init__(self, num_bits: int, num_hashes: int, bits: bytearray | None = None) -> None:
        if num_bits <= 0 or num_hashes <= 0:
            msg = f"a Bloom filter needs num_bits > 0 and num_hashes > 0, got {num_bits}, {num_hashes}"
            raise ValueError(msg)
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self.bits = bits if bits is not None else bytearray((num_bits + 7) // 8)

    @classmethod
    def for_capacity(cls, expected_items: int, fp_rate: float) -> BloomFilter:
        """A filter sized for ``expected_items`` at false-positive rate ``fp_rate``.

        >>> f = BloomFilter.for_capacity(1000, 0.01)
        >>> f.num_bits, f.num_hashes
        (9586, 7)
        """
        if not 0 < fp_rate < 1:
            msg = f"fp_rate must be between 0 and 1 (exclusive), got {fp_rate}"
            raise ValueError(msg)
        n = max(1, expected_items)
        m = math.ceil(-n * math.log(fp_rate) / math.log(2) ** 2)
        return cls(m, max(1, round(m / n * math.log(2))))

    @staticmethod
    def hashes(item: bytes) -> tuple[int, int]:
        """The two hashes of ``item`` that all positions derive from.

        Compute once, probe many filters of the same size.
        """
        digest = hashlib.blake2b(item, digest_size=16).digest()
        return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big") | 1

    def positions(self, hashes: tuple[int, int]) -> list[int]:
        """The bit positions of an item with ``hashes``."""
        h1, h2, m = hashes[0], hashes[1], self.num_bits
        return [(h1 + i * h2) % m for i in range(self.num_hashes)]

    def add(self, item: bytes) -> None:
        """Add ``item``."""
        self.add_positions(self.positions(self.hashes(item)))

    def add_positions(self, positions: list[int]) -> None:
        """Set the bits at ``positions``."""
        bits = self.bits
        for p in positions:
            bits[p >> 3] |= 1 << (p & 7)

    def contains_positions(self, positions: list[int]) -> bool:
        """False when an item with these positions was certainly never added."""
        bits = self.bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in positions)

    def __contains__(self, item: bytes) -> bool:
        return self.contains_positions(self.positions(self.hashes(item)))

    def to_bytes(self) -> bytes:
        """The filter as bytes: number of bits, number of hashes, the bit array."""
        return _HEADER.pack(self.num_bits, self.num_hashes) + bytes(self.bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter:
        """The filter that :meth:`to_bytes` wrote."""
        num_bits, num_hashes = _HEADER.unpack_from(data)
        bits = bytearray(data[_HEADER.size :])
        if len(bits) != (num_bits + 7) // 8:
            msg = f"corrupt Bloom filter: {len(bits)} bytes of bits for {num_bits} bits"
            raise ValueError(msg)
        return cls(num_bits, num_hashes, bits)


class Deduplicator:
    """Remembers ids for ``ttl_ms`` so that a consumer drops outputs it has already seen.

    Promises:
        * :meth:`seen_before` returns True when ``id`` was marked before and is still
          retained, else marks it and returns False. An id is retained at least while its
          time is within ``ttl_ms`` of the largest time seen (the *horizon*).
        * Ids older than the horizon are answered ``too_old_is_duplicate`` (default True:
          dropped, as Dataflow drops "network remnants"; counted in ``dedup-too-old``).
        * Answers depend only on the sequence of calls, not on restarts: ids live in the
          store, and the Bloom filters (one per time bucket of ``ttl_ms / buckets``) are
          rebuilt from the store on construction, after a restore.
        * Cost: a new id costs no store read unless a Bloom filter gives a false positive
          (about ``fp_rate``); every call for a new id writes two entries.

    GC: when the horizon passes the end of a time bucket, the bucket's ids and its filter
    are dropped (one range scan per bucket), inside the call that moved the horizon. Lookups
    probe one filter, the union (bitwise or) of the bucket filters, recomputed after a drop;
    every filter is sized for ``expected_items`` (the ids retained at once), so memory is
    about ``(buckets + 1) * 1.2 * expected_items`` bytes at a 1% rate.
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        ttl_ms: int,
        expected_items: int = 100_000,
        fp_rate: float = 0.01,
        *,
        buckets: int = 8,
        too_old_is_duplicate: bool = True,
        namespace: bytes = b"",
        metrics: MetricsGroup | None = None,
    ) -> None:
        if ttl_ms <= 0 or buckets <= 0:
            msg = f"ttl_ms and buckets must be > 0, got ttl_ms={ttl_ms}, buckets={buckets}"
            raise ValueError(msg)
        self._store = store
        self.ttl_ms = ttl_ms
        self._bucket_ms = -(-ttl_ms // buckets)
        self._too_old_answer = too_old_is_duplicate
        self._ids, self._buckets, self._max_key = (
            namespace + IDS_TAG,
            namespace + BUCKETS_TAG,
            namespace + MAX_TAG,
        )
        self._template = BloomFilter.for_capacity(max(64, expected_items), fp_rate)
        self._filters: dict[int, BloomFilter] = {}
        self._union = BloomFilter(self._template.num_bits, self._template.num_hashes)
        self._next_drop = MAX_MS
        stored = store.get(self._max_key)
        self._max_time = MIN_MS if stored is None else decode_ms(stored)
        counter = metrics.counter if metrics is not None else None
        self._duplicates = counter("duplicates") if counter else None
        self._too_old = counter("dedup-too-old") if counter else None
        self._rebuild()

    @property
    def horizon(self) -> int:
        """Ids with an earlier time are no longer retained."""
        return self._max_time - self.ttl_ms

    def seen_before(self, id: str, time_ms: int) -> bool:  # noqa: A002 - the domain's word
        """True when ``id`` is a duplicate; otherwise marks it seen (see the class)."""
        if time_ms > self._max_time:
            self._advance(time_ms)
        if time_ms < self.horizon:
            if self._too_old is not None:
                self._too_old.inc()
            return self._too_old_answer
        id_bytes = id.encode()
        positions = self._union.positions(BloomFilter.hashes(id_bytes))
        if self._union.contains_positions(positions):
            if self._store.get(self._ids + id_bytes) is not None:
                if self._duplicates is not None:
                    self._duplicates.inc()
                return True
        bucket = time_ms - time_ms % self._bucket_ms
        self._store.put(self._ids + id_bytes, encode_ms(bucket))
        self._store.put(self._buckets + encode_ms(bucket) + id_bytes, b"")
        self._filter(bucket).add_positions(positions)
        self._union.add_positions(positions)
        return False

    def _filter(self, bucket: int) -> BloomFilter:
        found = self._filters.get(bucket)
        if found is None:
            t = self._template
            found = self._filters[bucket] = BloomFilter(t.num_bits, t.num_hashes)
            self._next_drop = min(self._next_drop, bucket + self._bucket_ms)
        return found

    def _advance(self, time_ms: int) -> None:
        self._max_time = time_ms
        self._store.put(self._max_key, encode_ms(time_ms))
        if self.horizon >= self._next_drop:
            self._drop_expired()

    def _drop_expired(self) -> None:
        horizon = self.horizon
        for bucket in [b for b in self._filters if b + self._bucket_ms <= horizon]:
            self._drop(bucket)
        self._next_drop = min((b + self._bucket_ms for b in self._filters), default=MAX_MS)
        union = 0
        for f in self._filters.values():
            union |= int.from_bytes(f.bits, "little")
        self._union.bits = bytearray(union.to_bytes(len(self._union.bits), "little"))

    def _drop(self, bucket: int) -> None:
        prefix = self._buckets + encode_ms(bucket)
        with self._store.range(prefix, prefix_end(prefix)) as entries:
            keys = [e.key for e in entries]
        n = len(prefix)
        self._store.delete_all([*keys, *(self._ids + k[n:] for k in keys)])
        del self._filters[bucket]

    def _rebuild(self) -> None:
        n = len(self._buckets)
        with self._store.range(self._buckets, prefix_end(self._buckets)) as entries:
            for entry in entries:
                f = self._filter(decode_ms(entry.key, n))
                f.add_positions(f.positions(BloomFilter.hashes(entry.key[n + 8 :])))
        self._drop_expired()

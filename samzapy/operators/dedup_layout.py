"""The store of a :class:`~samzapy.operators.dedup.Deduplicator`.

Its encoding (the tags the operator writes under) and how it reads as data (a layout of
:mod:`samzapy.operators.state_layout`).

* ``ns + IDS_TAG + id`` -> ``bucket start``: the seen ids;
* ``ns + BUCKETS_TAG + bucket start + id`` -> ``b""``: the ids of each time bucket;
* ``ns + MAX_TAG`` -> the largest time seen (the GC horizon never goes back).

:class:`DedupLayout` shows them as ``kind='id'`` rows (``key``: the id, ``bucket``: the start
of its time bucket), ``kind='bucket_entry'`` (the same per bucket, the index the GC scans) and
``kind='max_time'`` (``time``: the largest time seen). Ids belong to no key (a re-sent record
carries its id, not the key it was routed by): a reshard copies them into every new task that
may receive the old task's keys, and keeps the largest time.

>>> from samzapy.operators.key_encoding import encode_ms
>>> layout = DedupLayout(b"dd")
>>> layout.decode(b"dd" + IDS_TAG + b"id-7", encode_ms(60_000))["value_json"]
'{"bucket":60000}'
>>> layout.partition_key(b"dd" + IDS_TAG + b"id-7", b""), layout.merge_rule(b"dd" + IDS_TAG + b"id-7", b"")
(None, 'copy')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samzapy.operators.key_encoding import decode_ms
from samzapy.operators.state_layout import COPY, MAX, record_row, unknown_row
from samzapy.store_codec import readable

IDS_TAG, BUCKETS_TAG, MAX_TAG = b"\x00di", b"\x00db", b"\x00dm"


@dataclass(frozen=True)
class DedupLayout:
    """The store of a deduplicator with ``namespace`` (module doc)."""

    namespace: bytes = b""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is the deduplicator's."""
        return self._tag(key) in (IDS_TAG, BUCKETS_TAG, MAX_TAG)

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry."""
        tag, n = self._tag(key), len(self.namespace) + 3
        if tag == IDS_TAG:
            return record_row("id", readable(key[n:]), {"bucket": decode_ms(value)})
        if tag == BUCKETS_TAG:
            return record_row("bucket_entry", readable(key[n + 8 :]), {"bucket": decode_ms(key, n)})
        if tag == MAX_TAG and len(key) == n:
            return record_row("max_time", None, {"time": decode_ms(value)})
        return unknown_row(key, value)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """None: ids and times are the task's (module doc)."""
        return None

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """``copy`` for ids, ``max`` for the largest time; ``None`` for an unknown entry."""
        tag = self._tag(key)
        if tag == MAX_TAG:
            return MAX if len(key) == len(self.namespace) + 3 else None
        return COPY if tag in (IDS_TAG, BUCKETS_TAG) else None

    def _tag(self, key: bytes) -> bytes | None:
        if not key.startswith(self.namespace):
            return None
        return key[len(self.namespace) : len(self.namespace) + 3]

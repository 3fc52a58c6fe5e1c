"""Layouts of the operators' stores beyond windows and stream-stream joins
(:mod:`samzapy.spark.state_layout` says what a layout is), and the sets of task-own entries
the operators keep, with the rule a reshard combines each by.

- :class:`DedupLayout` (:class:`~samzapy.operators.dedup.Deduplicator`): ``kind='id'`` rows
  (``key``: the id, ``bucket``: the start of its time bucket), ``kind='bucket_entry'`` (the
  same per bucket, the index the GC scans) and ``kind='max_time'`` (``time``: the largest time
  seen). Ids belong to no key (a re-sent record carries its id, not the key it was routed
  by): a reshard copies them into every new task that may receive the old task's keys, and
  keeps the largest time (the horizon never goes back).
- :class:`ForeignKeySubscriptionLayout` (:class:`~samzapy.operators.fk_join.ForeignKeyRight`'s
  subscription store): ``kind='subscription'`` rows, ``key`` the foreign key, ``left_key`` and
  ``version``; moved by the foreign key.
- :class:`VersionedLayout` (:class:`~samzapy.stores.versioned.VersionedStore`):
  ``kind='version'`` rows, ``key``, ``valid_from``, ``valid_to`` (the next version's
  ``valid_from``; null for the latest), ``deleted`` and ``value``; ``kind='observed_time'``
  (``time``: the largest timestamp put).
- :class:`TemporalBufferLayout` (:class:`~samzapy.operators.temporal_join.EventTimeStreamTableJoin`'s
  buffer): ``kind='buffered'`` rows, ``key``, ``event_time``, ``ref`` and ``record`` (the
  waiting stream record); ``kind='table_ended'`` once the table stream has ended.
- :class:`SharedLayout`: several of these in one store, each under its namespace.

An entry one of these layouts does not know reads as ``kind='internal'``, with the stored
key as escaped text in ``key`` and the value in ``stored``; it stops a reshard.

>>> from samzapy.operators.keys import encode_ms
>>> layout = DedupLayout(b"dd")
>>> layout.decode(b"dd\\x00di" + b"id-7", encode_ms(60_000))["value_json"]
'{"bucket":60000}'
>>> layout.partition_key(b"dd\\x00di" + b"id-7", b""), layout.merge_rule(b"dd\\x00di" + b"id-7", b"")
(None, 'copy')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from samzapy.operators.keys import decode_ms, decode_u64, unescape
from samzapy.operators.temporal_join import BUFFER_TAG, ENDED_TAG
from samzapy.serdes import Serde, StringSerde
from samzapy.spark.state_layout import (
    ALL,
    COPY,
    MAX,
    MIN,
    SUM,
    TaskEntries,
    decode_with,
    escaped_text,
    json_or_bytes,
    readable,
    record_row,
)
from samzapy.stores.versioned import TIME_TAG, VERSION_TAG

_DEDUP_IDS, _DEDUP_BUCKETS, _DEDUP_MAX = b"\x00di", b"\x00db", b"\x00dm"
_FK_TAG = b"\x00fk"


def event_time_entries(namespace: bytes = b"et") -> tuple[TaskEntries, ...]:
    """:class:`~samzapy.operators.event_time.EventTime`'s entries: the watermark and each
    source's progress (``min``), each source's idle flag (``all``)."""
    return (TaskEntries(namespace, MIN, b"\x00wm"), TaskEntries(namespace + b":", ALL, b"\x00id"))


def watermark_entries(namespace: bytes = b"") -> tuple[TaskEntries, ...]:
    """A :class:`~samzapy.operators.watermark.Watermark`'s entry (``min``)."""
    return (TaskEntries(namespace + b"\x00wm", MIN),)


def sequence_entries(namespace: bytes = b"sq") -> tuple[TaskEntries, ...]:
    """:class:`~samzapy.operators.event_time.SequenceDedup`'s last sequence per source (``max``)."""
    return (TaskEntries(namespace + b"\x00", MAX),)


def counter_entries(key: bytes) -> tuple[TaskEntries, ...]:
    """A :class:`~samzapy.operators.event_time.StoredCounter` at ``key`` (``sum``)."""
    return (TaskEntries(key, SUM),)


def registry_entries(namespace: bytes = b"") -> tuple[TaskEntries, ...]:
    """:class:`~samzapy.operators.registry.JoinRegistry`'s entries: registered ids and their
    GC index (``copy``), the largest time registered (``max``)."""
    return (
        TaskEntries(namespace + b"\x00ri", COPY),
        TaskEntries(namespace + b"\x00rg", COPY),
        TaskEntries(namespace + b"\x00rm", MAX),
    )


class PartLayout(Protocol):
    """A layout of the entries under one namespace, which :class:`SharedLayout` combines."""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is one of this layout's entries."""
        ...

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry (:data:`~samzapy.spark.state_layout.ROW_FIELDS`)."""
        ...

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The partition key of an entry (``None``: the task's own)."""
        ...

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """How a reshard combines a task-own entry (``None``: it cannot)."""
        ...


def unknown_row(key: bytes, value: bytes) -> dict[str, Any]:
    """The row of an entry no layout knows: its key and value as escaped text."""
    return record_row("internal", escaped_text(key), {"stored": escaped_text(value)})


@dataclass(frozen=True)
class DedupLayout:
    """The store of a :class:`~samzapy.operators.dedup.Deduplicator` with ``namespace``
    (module doc)."""

    namespace: bytes = b""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is the deduplicator's."""
        return self._tag(key) in (_DEDUP_IDS, _DEDUP_BUCKETS, _DEDUP_MAX)

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry."""
        tag, n = self._tag(key), len(self.namespace) + 3
        if tag == _DEDUP_IDS:
            return record_row("id", readable(key[n:]), {"bucket": decode_ms(value)})
        if tag == _DEDUP_BUCKETS:
            return record_row("bucket_entry", readable(key[n + 8 :]), {"bucket": decode_ms(key, n)})
        if tag == _DEDUP_MAX and len(key) == n:
            return record_row("max_time", None, {"time": decode_ms(value)})
        return unknown_row(key, value)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """None: ids and times are the task's (module doc)."""
        return None

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """``copy`` for ids, ``max`` for the largest time; ``None`` for an unknown entry."""
        tag = self._tag(key)
        if tag == _DEDUP_MAX:
            return MAX if len(key) == len(self.namespace) + 3 else None
        return COPY if tag in (_DEDUP_IDS, _DEDUP_BUCKETS) else None

    def _tag(self, key: bytes) -> bytes | None:
        if not key.startswith(self.namespace):
            return None
        return key[len(self.namespace) : len(self.namespace) + 3]


@dataclass(frozen=True)
class ForeignKeySubscriptionLayout:
    """The subscription store of :class:`~samzapy.operators.fk_join.ForeignKeyRight`
    (``namespace + 0x00 'fk' + escape(foreign key) + left key -> version``). ``key_serde`` and
    ``foreign_key_serde`` are the join's (default: string); the foreign key's bytes are its
    partition key, as the subscription topic is keyed by them.

    ``reshard_refusal``: why the job's state must not be resharded (a reshard stops with it
    before changing anything); ``None``: it may be.
    """

    namespace: bytes = b""
    key_serde: Serde | None = None
    foreign_key_serde: Serde | None = None
    reshard_refusal: str | None = None

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is a subscription."""
        return key.startswith(self.namespace + _FK_TAG)

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one subscription."""
        if not self.claims(key):
            return unknown_row(key, value)
        foreign, offset = unescape(key, len(self.namespace + _FK_TAG))
        fk_serde, key_serde = self.foreign_key_serde or StringSerde(), self.key_serde or StringSerde()
        body = {"left_key": decode_with(key_serde, key[offset:]), "version": decode_u64(value)}
        return record_row("subscription", decode_with(fk_serde, foreign), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The foreign key's bytes."""
        if not self.claims(key):
            return None
        return unescape(key, len(self.namespace + _FK_TAG))[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: subscriptions move by key; anything else is unknown."""
        return None


@dataclass(frozen=True)
class VersionedLayout:
    """A :class:`~samzapy.stores.versioned.VersionedStore` with ``namespace`` (module doc).
    Keys are the bytes the task passed (their partition key: a task passes its message keys'
    bytes); values the JSON the store encodes by default."""

    namespace: bytes = b""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is a version or the observed time."""
        return key.startswith(self.namespace + VERSION_TAG) or key == self.namespace + TIME_TAG

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one version (its end from ``following``, the next version of the key)."""
        prefix = self.namespace + VERSION_TAG
        if key == self.namespace + TIME_TAG:
            return record_row("observed_time", None, {"time": decode_ms(value)})
        if not key.startswith(prefix):
            return unknown_row(key, value)
        user, offset = unescape(key, len(prefix))
        deleted = value == b"\x00"
        body = {
            "valid_from": decode_ms(key, offset),
            "valid_to": _next_version_from(key[:offset], following),
            "deleted": deleted,
            "value": None if deleted else json_or_bytes(value[1:]),
        }
        return record_row("version", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """A version's key; ``None`` for the observed time."""
        prefix = self.namespace + VERSION_TAG
        return unescape(key, len(prefix))[0] if key.startswith(prefix) else None

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """``min`` for the observed time (a progress, as a watermark is)."""
        return MIN if key == self.namespace + TIME_TAG else None


def _next_version_from(key_prefix: bytes, following: bytes | None) -> int | None:
    """The time of ``following`` when it is the next version of the same key (its prefix,
    then 8 bytes of time), else ``None``."""
    if following is None or len(following) != len(key_prefix) + 8 or not following.startswith(key_prefix):
        return None
    return decode_ms(following, len(key_prefix))


@dataclass(frozen=True)
class TemporalBufferLayout:
    """The buffer of an :class:`~samzapy.operators.temporal_join.EventTimeStreamTableJoin`
    with ``namespace`` (module doc)."""

    namespace: bytes = b""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is a waiting record or the table's end flag."""
        return key.startswith(self.namespace + BUFFER_TAG) or key == self.namespace + ENDED_TAG

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one waiting stream record."""
        prefix = self.namespace + BUFFER_TAG
        if key == self.namespace + ENDED_TAG:
            return record_row("table_ended", None, {})
        if not key.startswith(prefix):
            return unknown_row(key, value)
        key_hex, record = orjson.loads(value)
        n = len(prefix)
        body = {"event_time": decode_ms(key, n), "ref": readable(key[n + 8 :]), "record": record}
        return record_row("buffered", readable(bytes.fromhex(key_hex)), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """A waiting record's key (kept in the value); ``None`` for the end flag."""
        if not key.startswith(self.namespace + BUFFER_TAG):
            return None
        return bytes.fromhex(orjson.loads(value)[0])

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """``all`` for the end flag: a new task's table has ended only if every old task
        whose keys it may receive had seen the end."""
        return ALL if key == self.namespace + ENDED_TAG else None


@dataclass(frozen=True)
class SharedLayout:
    """Several operators in one store: each entry is read by the first of ``parts`` that
    claims it (an entry none claims: ``kind='internal'``, and a reshard refuses it)."""

    parts: tuple[PartLayout, ...]

    def _part(self, key: bytes) -> PartLayout | None:
        return next((part for part in self.parts if part.claims(key)), None)

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry."""
        part = self._part(key)
        return unknown_row(key, value) if part is None else part.decode(key, value, following)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The claiming part's partition key."""
        part = self._part(key)
        return None if part is None else part.partition_key(key, value)

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """The claiming part's rule."""
        part = self._part(key)
        return None if part is None else part.merge_rule(key, value)

    @property
    def reshard_refusal(self) -> str | None:
        """The first part's refusal (:class:`ForeignKeySubscriptionLayout`)."""
        return next((r for p in self.parts if (r := getattr(p, "reshard_refusal", None))), None)

"""The state layouts of the stream-stream join's stores: the one definition of their bytes.

Layout 1, :class:`~samzapy.operators.stream_join.StreamStreamJoin`'s (layouts of
:mod:`samzapy.operators.state_layout`):

* a side store: ``escape(key) + time + record_id`` -> ``flag + encoded value``
  (:data:`MATCHED`: the record has matched);
* the expiry index: ``close time + side (b"l"/b"r") + side store key`` -> ``b""``.

Layout 2, :class:`~samzapy.operators.bucketed_join.BucketedStreamJoin`'s (about one changelog
record per input event):

* a side store, time-first by bucket: ``bucket start + escape(key) + time + record_id`` ->
  ``flag + encoded value``, where the bucket is the record's time rounded down to the
  layout's bucket width; flags :data:`UNMATCHED`, :data:`MATCHED`, :data:`DECIDED` (a left
  record of a join-once decided: joined or sent unmatched; the registry, folded in). Closed
  buckets are deleted by a range scan of the time prefix, so no per-record expiry index;
* the pending index: ``close time + side + side store key`` -> ``b""``, only for records of an
  emitting side stored unmatched (they must be emitted when their own window closes);
* in the same store, the meta entries under :data:`META` (which sorts after every time):
  :data:`LAYOUT_KEY` -> ``version byte + bucket width`` (the layout marker, written first)
  and :data:`MAX_DECIDED_KEY` -> the largest event time decided (the join-once horizon).

:class:`JoinBufferLayout` shows a side store as ``kind='buffered'`` rows (``event_time``,
``record_id``, ``matched``, ``value``), :class:`JoinExpiryLayout` the index as
``kind='expiry'`` rows (``close_at``, ``side``, ``event_time``, ``record_id``). Both move by
the join key.

>>> from samzapy.operators.key_encoding import encode_ms, escape
>>> row = JoinBufferLayout().decode(escape(b"ad-1") + encode_ms(5) + b"r1", MATCHED + b'{"n":1}')
>>> row["key_json"], row["value_json"]
('"ad-1"', '{"event_time":5,"record_id":"r1","matched":true,"value":{"n":1}}')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samzapy.operators.key_encoding import decode_ms, encode_ms, unescape
from samzapy.operators.state_layout import MAX, record_row
from samzapy.store_codec import json_or_bytes, readable

#: The flag byte that starts a side store's value.
UNMATCHED, MATCHED, DECIDED = b"\x00", b"\x01", b"\x02"

#: Layout 2's meta entries in the pending-index store: the prefix (above every encoded time),
#: the layout marker and the join-once horizon's largest decided time.
META = b"\xff" * 8
LAYOUT_KEY = META + b"layout"
MAX_DECIDED_KEY = META + b"max-decided"
#: The layout :class:`~samzapy.operators.bucketed_join.BucketedStreamJoin` writes.
LAYOUT_VERSION = 2


def bucket_of(time_ms: int, bucket_ms: int) -> int:
    """The start of the bucket of ``time_ms`` (rounded down, also for negative times).

    >>> bucket_of(1234, 1000), bucket_of(-1, 1000)
    (1000, -1000)
    """
    return time_ms - time_ms % bucket_ms


def buffer_key(bucket_ms: int, escaped: bytes, time_ms: int, record_id: bytes) -> bytes:
    """A layout-2 side store key: ``bucket start + escape(key) + time + record_id``."""
    return encode_ms(bucket_of(time_ms, bucket_ms)) + escaped + encode_ms(time_ms) + record_id


def parse_buffer_key(key: bytes) -> tuple[bytes, int, bytes]:
    r"""(user key, time, record id) of a layout-2 side store key.

    >>> from samzapy.operators.key_encoding import escape
    >>> parse_buffer_key(buffer_key(100, escape(b"k"), 250, b"r1"))
    (b'k', 250, b'r1')
    """
    user, offset = unescape(key, 8)
    return user, decode_ms(key, offset), key[offset + 8 :]


def pending_key(close_at: int, side: bytes, skey: bytes) -> bytes:
    """A layout-2 pending index key: ``close time + side + side store key``."""
    return encode_ms(close_at) + side + skey


def layout_marker(bucket_ms: int) -> bytes:
    """The value of :data:`LAYOUT_KEY`: the version byte and the bucket width."""
    return bytes([LAYOUT_VERSION]) + encode_ms(bucket_ms)


def read_marker(value: bytes) -> tuple[int, int | None]:
    """(version, bucket width or None) of a :data:`LAYOUT_KEY` value."""
    return value[0], decode_ms(value, 1) if len(value) >= 9 else None


@dataclass(frozen=True)
class JoinBufferLayout:
    """A side store of a stream-stream join (module doc)."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one buffered record."""
        user, offset = unescape(key)
        body = {
            "event_time": decode_ms(key, offset),
            "record_id": key[offset + 8 :].decode(errors="replace"),
            "matched": value[:1] == MATCHED,
            "value": json_or_bytes(value[1:]),
        }
        return record_row("buffered", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key."""
        return unescape(key)[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: every entry has a partition key."""
        return None


@dataclass(frozen=True)
class JoinExpiryLayout:
    """The expiry index of a stream-stream join (module doc)."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one index entry."""
        user, offset = unescape(key, 9)
        body = {
            "close_at": decode_ms(key),
            "side": key[8:9].decode(errors="replace"),
            "event_time": decode_ms(key, offset),
            "record_id": key[offset + 8 :].decode(errors="replace"),
        }
        return record_row("expiry", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key of the indexed record."""
        return unescape(key, 9)[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: every entry has a partition key."""
        return None


@dataclass(frozen=True)
class JoinBucketLayout:
    """A layout-2 side store (module doc): rows like :class:`JoinBufferLayout`'s, plus ``decided``."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one buffered record."""
        user, time_ms, record_id = parse_buffer_key(key)
        body = {
            "event_time": time_ms,
            "record_id": record_id.decode(errors="replace"),
            "matched": value[:1] != UNMATCHED,
            "decided": value[:1] == DECIDED,
            "value": json_or_bytes(value[1:]),
        }
        return record_row("buffered", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key."""
        return unescape(key, 8)[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: every entry has a partition key."""
        return None


@dataclass(frozen=True)
class JoinPendingLayout:
    """A layout-2 pending index and its meta entries (module doc).

    Pending entries read as ``kind='pending'`` rows (``close_at``, ``side``, ``event_time``,
    ``record_id``) and move by the join key; the meta entries are the task's own
    (``kind='internal'``), combined by a reshard with the largest value (the marker is the same
    in every task; the largest decided time is the horizon's, which never goes back).
    """

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry."""
        if key.startswith(META):
            name = key[len(META) :].decode(errors="replace")
            # objects, as the pending rows' are: read_state types one struct for the store
            if key == LAYOUT_KEY:
                version, bucket_ms = read_marker(value)
                shown: Any = {"version": version, "bucket_ms": bucket_ms}
            else:
                shown = {name.replace("-", "_"): decode_ms(value)}
            return record_row("internal", readable(name.encode()), shown)
        user, time_ms, record_id = parse_buffer_key(key[9:])
        body = {
            "close_at": decode_ms(key),
            "side": key[8:9].decode(errors="replace"),
            "event_time": time_ms,
            "record_id": record_id.decode(errors="replace"),
        }
        return record_row("pending", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key of a pending record; None for the meta entries."""
        return None if key.startswith(META) else unescape(key, 17)[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """The meta entries: the largest (see the class)."""
        return MAX if key.startswith(META) else None

"""The state layouts of the stream-stream join's stores.

How the stores of :class:`~samzapy.operators.stream_join.StreamStreamJoin` read as data (layouts
of :mod:`samzapy.operators.state_layout`); the encoding is the join's:

* a side store: ``escape(key) + time + record_id`` -> ``flag + encoded value``
  (:data:`MATCHED`: the record has matched);
* the expiry index: ``close time + side (b"l"/b"r") + side store key`` -> ``b""``.

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

from samzapy.operators.key_encoding import decode_ms, unescape
from samzapy.operators.state_layout import record_row
from samzapy.store_codec import json_or_bytes, readable

#: The flag byte that starts a side store's value.
UNMATCHED, MATCHED = b"\x00", b"\x01"


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

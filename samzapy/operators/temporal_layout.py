"""The buffer of an :class:`~samzapy.operators.temporal_join.EventTimeStreamTableJoin`.

Its encoding (the tags the join writes under) and how it reads as data (a layout of
:mod:`samzapy.operators.state_layout`).

* ``namespace + BUFFER_TAG + t + ref`` -> JSON ``[key (hex), stream value]``: waiting stream
  records;
* ``namespace + ENDED_TAG`` -> ``b"1"`` once the table stream has ended.

:class:`TemporalBufferLayout` shows them as ``kind='buffered'`` rows (``key``, ``event_time``,
``ref`` and ``record``, the waiting stream record) and ``kind='table_ended'``.

>>> from samzapy.operators.key_encoding import encode_ms
>>> row = TemporalBufferLayout().decode(BUFFER_TAG + encode_ms(7) + b"r1", b'["6b",{"n":1}]')
>>> row["key_json"], row["value_json"]
('"k"', '{"event_time":7,"ref":"r1","record":{"n":1}}')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from samzapy.operators.key_encoding import decode_ms
from samzapy.operators.state_layout import ALL, record_row, unknown_row
from samzapy.store_codec import readable

BUFFER_TAG = b"\x00jb"
ENDED_TAG = b"\x00je"


@dataclass(frozen=True)
class TemporalBufferLayout:
    """The buffer with ``namespace`` (module doc)."""

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
        """``all`` for the end flag.

        A new task's table has ended only if every old task whose keys it may receive had seen
        the end.
        """
        return ALL if key == self.namespace + ENDED_TAG else None

r"""Where :class:`~samzapy.operators.windows.WindowedAggregation` keeps its windows in a store.

Fixed windows (tumbling and hopping) have one entry each, time-first::

    namespace + 0x00 'wt' + end + escape(key) + start  ->  encoded aggregate

An event updates one entry in place (a get and a put), and the windows that are due are one
range scan from the smallest end, in (end, key, start) order, with their values in the same
scan: closing a window is that scan and one delete. (Until round 3 a fixed window had a
key-first entry and a separate end index, each put and deleted: twice the writes, and a get
per closed window.)

Session windows keep the key-first layout, because a session's end moves as it grows and a
new event must find the sessions of its key::

    namespace + 0x00 'ww' + escape(key) + start  ->  end + encoded aggregate
    namespace + 0x00 'we' + end + escape(key) + start  ->  b""   (index of ends)

Times are :func:`~samzapy.operators.key_encoding.encode_ms` (8 bytes, sorting like the numbers).
A store written by an older samzapy holds fixed windows in the session layout:
:func:`migrate_fixed` moves them (once, when the operator is built).

How these entries read as data (:class:`WindowLayout`, a layout of
:mod:`samzapy.operators.state_layout`): fixed windows become ``kind='window'`` rows with the
user key, window start and end and the aggregate; session windows ``kind='session'``;
early-firing markers ``kind='early_marker'`` (the marked window, no aggregate); the task's own
bookkeeping (watermarks, dedup sequences, counters) ``kind='internal'`` rows with the stored
key and value escaped as text.

>>> k = fixed_key(b"\x00wt", 7_200_000, b"alice", 3_600_000)
>>> decode_fixed_key(k, 3)
(b'alice', 3600000, 7200000)
>>> from samzapy.operators.state_layout import SUM, TaskEntries
>>> layout = WindowLayout(b"cw", own=(TaskEntries(b"\x00late", SUM),))
>>> row = layout.decode(fixed_key(b"cw\x00wt", 7_200_000, b"ann", 3_600_000), b"3")
>>> row["kind"], row["key_json"], row["window_start"], row["window_end"], row["value_json"]
('window', '"ann"', 3600000, 7200000, '3')
>>> layout.partition_key(fixed_key(b"cw\x00wt", 7_200_000, b"ann", 3_600_000), b"3")
b'ann'
>>> layout.merge_rule(b"\x00late", b"")
'sum'
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any

from samzapy.operators.emission import DIRTY_TAG
from samzapy.operators.key_encoding import decode_ms, encode_ms, escape, prefix_end, unescape
from samzapy.operators.state_layout import TaskEntries, rule_of
from samzapy.store_codec import escaped_text, json_or_bytes, readable, to_json
from samzapy.stores.base import KeyValueStore

FIXED_TAG = b"\x00wt"
SESSION_TAG = b"\x00ww"
SESSION_INDEX_TAG = b"\x00we"
#: Legacy windows moved per store batch by :func:`migrate_fixed`.
MIGRATE_BATCH = 10_000


def fixed_key(prefix: bytes, end: int, key: bytes, start: int) -> bytes:
    """The store key of the fixed window ``[start, end)`` of ``key`` under ``prefix``.

    ``prefix`` is ``namespace + FIXED_TAG``.
    """
    return prefix + encode_ms(end) + escape(key) + encode_ms(start)


def decode_fixed_key(stored: bytes, prefix_length: int) -> tuple[bytes, int, int]:
    """(key, start, end) of a :func:`fixed_key` whose prefix is ``prefix_length`` bytes."""
    end = decode_ms(stored, prefix_length)
    key, offset = unescape(stored, prefix_length + 8)
    return key, decode_ms(stored, offset), end


def migrate_fixed(store: KeyValueStore[bytes, bytes], namespace: bytes) -> int:
    """Move fixed windows stored in the session layout (samzapy before round 3) to the fixed layout.

    Returns how many were moved (0, after one seek, for a store that has none).

    Each batch is one ``put_all`` (one WriteBatch, atomic), so a crash part-way leaves every
    window in exactly one of the two layouts, and the next start moves the rest. Index
    entries of windows already gone (stale) are deleted too.
    """
    wprefix, iprefix = namespace + SESSION_TAG, namespace + SESSION_INDEX_TAG
    tprefix = namespace + FIXED_TAG
    moved = 0
    while batch := _first(store, wprefix, MIGRATE_BATCH):
        writes: list[tuple[bytes, bytes | None]] = []
        n = len(wprefix)
        for wkey, stored in batch:
            suffix = wkey[n:]
            writes += [(wkey, None), (iprefix + stored[:8] + suffix, None)]
            writes.append((tprefix + stored[:8] + suffix, stored[8:]))
        store.put_all(writes)
        moved += len(batch)
    while stale := _first(store, iprefix, MIGRATE_BATCH):
        store.delete_all([k for k, _ in stale])
    return moved


def _first(store: KeyValueStore[bytes, bytes], prefix: bytes, limit: int) -> list[tuple[bytes, bytes]]:
    with store.range(prefix, prefix_end(prefix)) as entries:
        return [(e.key, e.value) for e in islice(entries, limit)]


@dataclass(frozen=True)
class WindowLayout:
    """A :class:`~samzapy.operators.windows.WindowedAggregation` store with ``namespace`` (module doc).

    Aggregates are the JSON the default aggregators encode. ``own`` names the task's own entries
    that share the store (watermarks, sequences, counters: the operators' ``*_entries`` helpers)
    and how a reshard combines them.
    """

    namespace: bytes
    own: tuple[TaskEntries, ...] = ()

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry (:data:`~samzapy.operators.state_layout.ROW_FIELDS`)."""
        fixed, session = self.namespace + FIXED_TAG, self.namespace + SESSION_TAG
        if key.startswith(fixed):
            user, start, end = decode_fixed_key(key, len(fixed))
            return _window_row("window", user, start, end, value)
        if key.startswith(session):
            user, offset = unescape(key, len(session))
            return _window_row("session", user, decode_ms(key, offset), decode_ms(value), value[8:])
        marked = self._marked(key)
        if marked is not None and marked.startswith(fixed):
            user, start, end = decode_fixed_key(marked, len(fixed))
            return _window_row("early_marker", user, start, end, b"null")
        if marked is not None:  # a session's marker: its end is in the session's entry
            user, offset = unescape(marked, len(session))
            return _window_row("early_marker", user, decode_ms(marked, offset), None, b"null")
        return {
            "kind": "internal",
            "key_json": to_json(escaped_text(key)),
            "window_start": None,
            "window_end": None,
            "value_json": to_json(escaped_text(value)),
        }

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The window's key; ``None`` for the task's own entries."""
        fixed, session = self.namespace + FIXED_TAG, self.namespace + SESSION_TAG
        if key.startswith(fixed):
            return decode_fixed_key(key, len(fixed))[0]
        if key.startswith(session):
            return unescape(key, len(session))[0]
        if key.startswith(self.namespace + SESSION_INDEX_TAG):
            return unescape(key, len(self.namespace + SESSION_INDEX_TAG) + 8)[0]
        marked = self._marked(key)
        return None if marked is None else self.partition_key(marked, b"")

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """How a reshard combines a task-own entry (``own``)."""
        return rule_of(self.own, key)

    def _marked(self, key: bytes) -> bytes | None:
        """The window store key an early-firing marker names (``None``: not a marker)."""
        marker = self.namespace + DIRTY_TAG
        if not key.startswith(marker):
            return None
        window = key[len(marker) :]
        tags = (self.namespace + FIXED_TAG, self.namespace + SESSION_TAG)
        return window if window.startswith(tags) else None


def _window_row(kind: str, user: bytes, start: int, end: int | None, aggregate: bytes) -> dict[str, Any]:
    return {
        "kind": kind,
        "key_json": to_json(readable(user)),
        "window_start": start,
        "window_end": end,
        "value_json": to_json(json_or_bytes(aggregate)),
    }

"""Where :class:`~samzapy.operators.windows.WindowedAggregation` keeps its windows in a store.

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

Times are :func:`~samzapy.operators.keys.encode_ms` (8 bytes, sorting like the numbers).
A store written by an older samzapy holds fixed windows in the session layout:
:func:`migrate_fixed` moves them (once, when the operator is built).

>>> k = fixed_key(b"\\x00wt", 7_200_000, b"alice", 3_600_000)
>>> decode_fixed_key(k, 3)
(b'alice', 3600000, 7200000)
"""

from __future__ import annotations

from itertools import islice

from samzapy.operators.keys import decode_ms, encode_ms, escape, prefix_end, unescape
from samzapy.stores.base import KeyValueStore

FIXED_TAG = b"\x00wt"
SESSION_TAG = b"\x00ww"
SESSION_INDEX_TAG = b"\x00we"
#: Legacy windows moved per store batch by :func:`migrate_fixed`.
MIGRATE_BATCH = 10_000


def fixed_key(prefix: bytes, end: int, key: bytes, start: int) -> bytes:
    """The store key of the fixed window ``[start, end)`` of ``key`` under ``prefix``
    (``namespace + FIXED_TAG``)."""
    return prefix + encode_ms(end) + escape(key) + encode_ms(start)


def decode_fixed_key(stored: bytes, prefix_length: int) -> tuple[bytes, int, int]:
    """(key, start, end) of a :func:`fixed_key` whose prefix is ``prefix_length`` bytes."""
    end = decode_ms(stored, prefix_length)
    key, offset = unescape(stored, prefix_length + 8)
    return key, decode_ms(stored, offset), end


def migrate_fixed(store: KeyValueStore[bytes, bytes], namespace: bytes) -> int:
    """Move fixed windows stored in the session layout (samzapy before round 3) to the fixed
    layout; returns how many were moved (0, after one seek, for a store that has none).

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

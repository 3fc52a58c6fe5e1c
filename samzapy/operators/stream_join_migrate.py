"""Rewrites a stream-stream join's stores from layout 1 to layout 2, in place, at start.

Layout 1 (:class:`~samzapy.operators.stream_join.StreamStreamJoin` with a
:class:`~samzapy.operators.registry.JoinRegistry` deciding left records) and layout 2
(:class:`~samzapy.operators.bucketed_join.BucketedStreamJoin` with join-once) are defined in
:mod:`samzapy.operators.stream_join_layout`. :func:`migrate_to_layout_2`:

* rewrites every buffered record under its layout-2 key; a left record that matched, or whose
  id the registry holds, becomes :data:`~samzapy.operators.stream_join_layout.DECIDED` (the
  registry registered it when it was joined; one it refused as too old stays refused);
* gives each record still unmatched of a side the join emits unmatched (left: the left side,
  outer: both) a pending-index entry (it is sent unmatched when its window closes, as layout
  1's expiry index would have had it);
* deletes layout 1's expiry index, and writes the layout marker and the largest decided time
  (the registry's, so the horizon does not go back).

The registry itself stays where it is: decided clicks whose buffered record had already
expired are known only there, so the join consults it (``legacy_decided``) until its entries
pass the retention and its own ``gc()`` has collected them.

Everything goes through the stores' changelogs. A crash in the middle leaves writes past the
checkpoint, which the restore trims: the stores are layout 1 again, and the next start migrates
again.
"""

from __future__ import annotations

from samzapy.operators.key_encoding import MIN_MS, decode_ms, encode_ms, unescape
from samzapy.operators.registry import JoinRegistry
from samzapy.operators.stream_join_layout import (
    DECIDED,
    LAYOUT_KEY,
    MATCHED,
    MAX_DECIDED_KEY,
    UNMATCHED,
    buffer_key,
    layout_marker,
    pending_key,
)
from samzapy.stores.base import KeyValueStore


def migrate_to_layout_2(
    left: KeyValueStore[bytes, bytes],
    right: KeyValueStore[bytes, bytes],
    index: KeyValueStore[bytes, bytes],
    registry: JoinRegistry | None,
    *,
    bucket_ms: int,
    left_close_ms: int,
    kind: str = "left",
    right_close_ms: int = 0,
) -> dict[str, int]:
    """Rewrite layout-1 stores as layout 2 (module doc); how many entries of each kind.

    ``left_close_ms`` (``right_close_ms``) is how long after its time a left (right) record's
    window closes (window after (before) + grace); ``bucket_ms`` the layout-2 bucket width to
    write. ``kind`` is the join's: only the sides it emits unmatched (``left``: the left one,
    ``outer``: both, ``inner``: none) get pending entries. ``registry`` None: a join without
    join-once (no record is decided; matched flags stay as they are).
    """
    with index.all() as entries:
        old_index = [e.key for e in entries]  # layout 1's expiry index: all of it goes
    index.delete_all(old_index)
    counts = {"left": 0, "right": 0, "pending": 0, "expiry index": len(old_index)}
    emitting = {"inner": (), "left": ("left",), "outer": ("left", "right")}[kind]
    for name, store in (("left", left), ("right", right)):
        with store.all() as entries:
            old = [(e.key, e.value) for e in entries]
        new: list[tuple[bytes, bytes | None]] = []
        pending: list[tuple[bytes, bytes | None]] = []
        for key, value in old:
            offset = unescape(key)[1]
            time_ms, record_id = decode_ms(key, offset), key[offset + 8 :]
            skey = buffer_key(bucket_ms, key[:offset], time_ms, record_id)
            flag = value[:1]
            # join-once decides left records only
            if (
                name == "left"
                and registry is not None
                and (flag == MATCHED or registry.is_registered(record_id.decode()))
            ):
                flag = DECIDED
            elif flag == UNMATCHED and name in emitting:
                close = time_ms + (left_close_ms if name == "left" else right_close_ms)
                pending.append((pending_key(close, name[:1].encode(), skey), b""))
            new.append((skey, flag + value[1:]))
        store.delete_all([k for k, _ in old])
        store.put_all(new)
        counts[name] = len(new)
        index.put_all(pending)
        counts["pending"] += len(pending)
    index.put(LAYOUT_KEY, layout_marker(bucket_ms))
    if registry is None:
        return counts
    largest = registry.horizon + registry.retention_ms  # the largest time registered
    if largest != MIN_MS:  # so that the horizon does not go back
        index.put(MAX_DECIDED_KEY, encode_ms(largest))
    return counts

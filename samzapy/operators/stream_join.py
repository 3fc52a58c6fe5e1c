"""The windowed stream-stream join: each side waits in its store for the join window.

Store layout:

* left and right stores: ``escape(key) + time + record_id`` -> ``flag + encoded value``, where
  the flag byte is 1 once the record has matched (needed for left/outer results);
* expiry store: ``close time + side (b"l"/b"r") + side store key`` -> ``b""``, a time-first
  index so :meth:`StreamStreamJoin.expire` reads only the records that are due.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from samzapy.metrics import MetricsGroup
from samzapy.operators.aggregators import json_encode
from samzapy.operators.key_encoding import MIN_MS, decode_ms, encode_ms, escape, unescape, until_inclusive
from samzapy.operators.stream_join_layout import MATCHED, UNMATCHED
from samzapy.operators.watermark import Watermark
from samzapy.output_ids import join_id
from samzapy.stores.base import KeyValueStore


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A joined pair, or an unmatched record (the other side ``None``) of a left/outer join.

    ``id`` is :func:`samzapy.output_ids.join_id` of the key and both record ids, the same
    whenever the same pair (or unmatched record) is emitted again.
    """

    key: bytes
    left: Any
    right: Any
    left_time: int | None
    right_time: int | None
    value: Any
    id: str


def check_join_args(kind: str, window_before_ms: int, window_after_ms: int, grace_ms: int) -> None:
    """Raise ``ValueError`` naming the bad argument of a stream-stream join, if any.

    ``kind`` must be inner, left or outer; the windows and grace must be >= 0.
    """
    if kind not in ("inner", "left", "outer"):
        msg = f"join kind must be one of ['inner', 'left', 'outer'], got {kind!r}"
        raise ValueError(msg)
    if min(window_before_ms, window_after_ms, grace_ms) < 0:
        msg = (
            f"join window and grace must be >= 0, got before={window_before_ms}, "
            f"after={window_after_ms}, grace={grace_ms}"
        )
        raise ValueError(msg)


class JoinSides:
    """What both store layouts of the stream-stream join share: reach and result building.

    :class:`StreamStreamJoin` (layout 1) and
    :class:`~samzapy.operators.bucketed_join.BucketedStreamJoin` (layout 2) set
    ``_before``, ``_after`` and ``_joiner``; a result's value is ``joiner(left, right)`` and
    its id :func:`~samzapy.output_ids.join_id` of (key, left id, right id).
    """

    _before: int
    _after: int
    _joiner: Callable[[Any, Any], Any]

    def _reach(self, side: bytes) -> int:
        """How far after its own time a record of ``side`` can match."""
        return self._after if side == b"l" else self._before

    def _result(
        self,
        key: bytes,
        left: Any,
        right: Any,
        lt: int | None,
        rt: int | None,
        lid: str | None,
        rid: str | None,
    ) -> JoinResult:
        return JoinResult(key, left, right, lt, rt, self._joiner(left, right), join_id(key, lid, rid))

    def _unmatched(self, side: bytes, key: bytes, time_ms: int, value: Any, record_id: str) -> JoinResult:
        if side == b"l":
            return self._result(key, value, None, time_ms, None, record_id, None)
        return self._result(key, None, value, None, time_ms, None, record_id)


class StreamStreamJoin(JoinSides):
    """Joins left and right records of the same key whose times are close enough.

    A left record at ``tl`` and a right record at ``tr`` match when
    ``tl - window_before_ms <= tr <= tl + window_after_ms``. Either side may arrive first;
    each record waits in its store until its window is *closed*: a left record once
    ``tl + window_after_ms + grace_ms < watermark``, a right one once
    ``tr + window_before_ms + grace_ms < watermark`` (no matching record can still arrive
    in time).

    Promises:
        * ``add_left``/``add_right`` return the matches of the new record with the open
          records of the other side, in (time, record id) order, with ``joiner(left, right)``
          as the value. Closed records not yet expired are ignored, so results do not depend
          on when :meth:`expire` runs.
        * Unmatched records of a ``left`` (left side) or ``outer`` (both sides) join are
          emitted only once their window has closed, by :meth:`expire` (never spuriously
          early, unlike KAFKA-10847), with ``joiner(left, None)`` / ``joiner(None, right)``.
          A record that arrives with its window already closed is matched against the open
          records, not stored, and (if unmatched) returned at once as unmatched; it is
          counted in ``late-join-records``.
        * Adding the same record (key, time, record id) again replaces it and repeats its
          matches with the same ids; use a :class:`~samzapy.operators.registry.JoinRegistry`
          to join an event at most once.
        * Expired records are deleted with their index entries in the same call; after a
          crash, state is restored to the checkpoint, so results are re-emitted with the
          same ids or not at all, never lost.

    Values are encoded with ``encode``/``decode`` (JSON by default).
    """

    def __init__(
        self,
        left_store: KeyValueStore[bytes, bytes],
        right_store: KeyValueStore[bytes, bytes],
        expiry_store: KeyValueStore[bytes, bytes],
        watermark: Watermark,
        joiner: Callable[[Any, Any], Any],
        *,
        window_before_ms: int,
        window_after_ms: int,
        grace_ms: int = 0,
        kind: Literal["inner", "left", "outer"] = "inner",
        encode: Callable[[Any], bytes] = json_encode,
        decode: Callable[[bytes], Any] = orjson.loads,
        metrics: MetricsGroup | None = None,
    ) -> None:
        check_join_args(kind, window_before_ms, window_after_ms, grace_ms)
        self._stores = {b"l": left_store, b"r": right_store}
        self._expiry = expiry_store
        self._watermark = watermark
        self._joiner = joiner
        self._before, self._after, self._grace = window_before_ms, window_after_ms, grace_ms
        self._emits = {b"l": kind in ("left", "outer"), b"r": kind == "outer"}
        self._encode, self._decode = encode, decode
        self._late = metrics.counter("late-join-records") if metrics is not None else None

    def add_left(self, key: bytes, event_time_ms: int, value: Any, record_id: str) -> list[JoinResult]:
        """Add a left record; its matches with open right records."""
        return self._add(b"l", key, event_time_ms, value, record_id)

    def add_right(self, key: bytes, event_time_ms: int, value: Any, record_id: str) -> list[JoinResult]:
        """Add a right record; its matches with open left records."""
        return self._add(b"r", key, event_time_ms, value, record_id)

    def _add(self, side: bytes, key: bytes, time_ms: int, value: Any, record_id: str) -> list[JoinResult]:
        other = b"r" if side == b"l" else b"l"
        escaped = escape(key)
        matches = self._match(side, other, key, escaped, time_ms, value, record_id)
        close_at = time_ms + self._reach(side) + self._grace
        skey = escaped + encode_ms(time_ms) + record_id.encode()
        if close_at < self._watermark.current:
            if self._late is not None:
                self._late.inc()
            if not matches and self._emits[side]:
                return [self._unmatched(side, key, time_ms, value, record_id)]
            return matches
        store = self._stores[side]
        flag = MATCHED if matches else UNMATCHED
        if not matches and self._emits[side]:
            old = store.get(skey)
            flag = old[:1] if old is not None else flag
        store.put(skey, flag + self._encode(value))
        self._expiry.put(encode_ms(close_at) + side + skey, b"")
        return matches

    def _match(
        self, side: bytes, other: bytes, key: bytes, escaped: bytes, t: int, value: Any, rid: str
    ) -> list[JoinResult]:
        # the other side's times that match: left tl sees right in [tl - before, tl + after]
        lo, hi = (t - self._before, t + self._after) if side == b"l" else (t - self._after, t + self._before)
        store = self._stores[other]
        with store.range(escaped + encode_ms(lo), escaped + encode_ms(hi + 1)) as entries:
            found = [(e.key, e.value) for e in entries]
        if not found:
            return []
        wm, reach, n = self._watermark.current, self._reach(other) + self._grace, len(escaped)
        results = []
        for okey, stored in found:
            other_time = decode_ms(okey, n)
            if other_time + reach < wm:
                continue  # closed: as if already expired
            other_value, other_id = self._decode(stored[1:]), okey[n + 8 :].decode()
            if side == b"l":
                results.append(self._result(key, value, other_value, t, other_time, rid, other_id))
            else:
                results.append(self._result(key, other_value, value, other_time, t, other_id, rid))
            if stored[:1] == UNMATCHED and self._emits[other]:
                store.put(okey, MATCHED + stored[1:])
        return results

    def expire(self) -> list[JoinResult]:
        """Delete the records whose window has closed at the current watermark.

        The unmatched ones of a left/outer join, in (close time, side, key, time, record id)
        order.
        """
        upper = until_inclusive(b"", self._watermark.current - 1)
        with self._expiry.range(encode_ms(MIN_MS), upper) as entries:
            due = [e.key for e in entries]
        if not due:
            return []
        results = []
        deletes: dict[bytes, list[bytes]] = {b"l": [], b"r": []}
        for ikey in due:
            side, skey = ikey[8:9], ikey[9:]
            if self._emits[side]:
                stored = self._stores[side].get(skey)
                if stored is not None and stored[:1] == UNMATCHED:
                    results.append(self._unmatched_from_key(side, skey, self._decode(stored[1:])))
            deletes[side].append(skey)
        for side, keys in deletes.items():
            if keys:
                self._stores[side].delete_all(keys)
        self._expiry.delete_all(due)
        return results

    def _unmatched_from_key(self, side: bytes, skey: bytes, value: Any) -> JoinResult:
        key, offset = unescape(skey)
        return self._unmatched(side, key, decode_ms(skey, offset), value, skey[offset + 8 :].decode())

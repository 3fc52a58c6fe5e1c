"""The windowed stream-stream join in store layout 2: about one changelog record per input event.

:class:`BucketedStreamJoin` joins as :class:`~samzapy.operators.stream_join.StreamStreamJoin`
does (same matches, same result ids and values), in the layout of
:mod:`samzapy.operators.stream_join_layout` (layout 2) which writes less:

* each record is one put, keyed time-first by bucket (:data:`BUCKET_SPANS` join spans wide):
  closed buckets are deleted by a range scan of the time prefix, so there is no expiry index
  entry to write and delete per record;
* only records of an emitting side stored unmatched get a pending-index entry (they must be
  emitted unmatched when their own window closes, not when their bucket does);
* with ``once_retention_ms``, each left record is decided at most once (joined, or sent
  unmatched) as a :class:`~samzapy.operators.registry.JoinRegistry` would decide it, but the
  registry is the buffered record's :data:`~samzapy.operators.stream_join_layout.DECIDED`
  flag: left buckets are kept until the retention's horizon instead of a separate id entry
  and GC index entry per record.

Closed records wait in their bucket until it is deleted; they are ignored by matching (as
layout 1 ignores closed records not yet expired), so results do not depend on when
:meth:`BucketedStreamJoin.expire` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any, Literal

import orjson

from samzapy.metrics import MetricsGroup
from samzapy.operators.aggregators import json_encode
from samzapy.operators.key_encoding import MIN_MS, decode_ms, encode_ms, escape, until_inclusive
from samzapy.operators.stream_join import JoinResult, JoinSides, check_join_args
from samzapy.operators.stream_join_layout import (
    DECIDED,
    LAYOUT_KEY,
    LAYOUT_VERSION,
    MATCHED,
    MAX_DECIDED_KEY,
    UNMATCHED,
    bucket_of,
    buffer_key,
    layout_marker,
    parse_buffer_key,
    pending_key,
    read_marker,
)
from samzapy.operators.watermark import Watermark
from samzapy.stores.base import KeyValueStore

#: The default bucket width, in join spans (before + after + grace).
BUCKET_SPANS = 4
#: At most this many closed records of a side are deleted per :meth:`BucketedStreamJoin.expire`
#: call (the rest at the next calls): a whole bucket at once would stall a live job for as long
#: as deleting four windows of records takes. Layout 1 deleted about as many per second
#: (record and index entry) at 8k input events/s per task.
GC_BATCH = 16_384


class JoinLayoutError(RuntimeError):
    """The join's stores hold state in another layout than the one this operator writes."""


class BucketedStreamJoin(JoinSides):
    """Joins left and right records of the same key whose times are close enough (layout 2).

    Matching, windows, grace, late records, kinds and result ids are those of
    :class:`~samzapy.operators.stream_join.StreamStreamJoin` (read its promises); on top:

    Promises:
        * Same inputs, same results (ids and values) as ``StreamStreamJoin``; with
          ``once_retention_ms``, the same as ``StreamStreamJoin`` followed by a
          :class:`~samzapy.operators.registry.JoinRegistry` of that retention deciding each
          left record by its record id, where a copy of a left record is the same key,
          time and record id (a registry keyed by the id alone also refuses an id seen
          again at another time or key). ``legacy_decided(record_id)`` says whether a left
          record was decided before (layout 1's registry, after
          :mod:`~samzapy.operators.stream_join_migrate`).
        * A record costs one store write when it arrives (plus a pending-index entry when it
          waits unmatched on an emitting side, and a flag update when it is matched or
          decided later) and one delete when its bucket is deleted.
        * The stores say their layout: a marker entry in ``index_store`` is written when the
          stores are empty; stores that hold entries without it (layout 1's) or another
          layout's marker raise :class:`JoinLayoutError` naming the store and what to do.
        * Expired buckets are deleted and pending entries consumed in the same
          :meth:`expire` call; after a crash, state is restored to the checkpoint, so
          results are re-emitted with the same ids or not at all, never lost.
    """

    def __init__(
        self,
        left_store: KeyValueStore[bytes, bytes],
        right_store: KeyValueStore[bytes, bytes],
        index_store: KeyValueStore[bytes, bytes],
        watermark: Watermark,
        joiner: Callable[[Any, Any], Any],
        *,
        window_before_ms: int,
        window_after_ms: int,
        grace_ms: int = 0,
        kind: Literal["inner", "left", "outer"] = "inner",
        once_retention_ms: int | None = None,
        legacy_decided: Callable[[str], bool] | None = None,
        bucket_ms: int | None = None,
        gc_batch: int = GC_BATCH,
        store_names: tuple[str, str, str] = ("left", "right", "index"),
        duplicates_metric: str | None = None,
        encode: Callable[[Any], bytes] = json_encode,
        decode: Callable[[bytes], Any] = orjson.loads,
        metrics: MetricsGroup | None = None,
    ) -> None:
        check_join_args(kind, window_before_ms, window_after_ms, grace_ms)
        if once_retention_ms is not None and once_retention_ms <= 0:
            msg = f"once_retention_ms must be > 0, got {once_retention_ms}"
            raise ValueError(msg)
        self._stores = {b"l": left_store, b"r": right_store}
        self._index = index_store
        self._watermark = watermark
        self._joiner = joiner
        self._before, self._after, self._grace = window_before_ms, window_after_ms, grace_ms
        self._emits = {b"l": kind in ("left", "outer"), b"r": kind == "outer"}
        self._once = once_retention_ms
        # decisions of layout 1 kept in its registry (stream_join_migrate), by left record id
        self._legacy = legacy_decided
        self._encode, self._decode = encode, decode
        self._gc_batch = gc_batch
        # A match range (before + after wide) spans at most two buckets, and with buckets four
        # times as wide one in about four (a range scan per bucket: the join's main read cost);
        # the price is closed records kept up to four windows longer, until their bucket goes.
        span = max(1, window_before_ms + window_after_ms + grace_ms)
        self.bucket_ms = self._check_layout(store_names, bucket_ms or BUCKET_SPANS * span)
        stored = index_store.get(MAX_DECIDED_KEY)
        self._max_decided = MIN_MS if stored is None else decode_ms(stored)
        group = metrics
        self._late = group.counter("late-join-records") if group is not None else None
        # join-once: the copies refused, counted where the task says (e.g. duplicate-clicks)
        named = group is not None and duplicates_metric is not None
        self._duplicates = group.counter(duplicates_metric) if named else None  # type: ignore[union-attr,arg-type]
        self._too_old = group.counter("registry-too-old") if group is not None else None

    def _check_layout(self, names: tuple[str, str, str], bucket_ms: int) -> int:
        """The bucket width of the stores' layout; writes the marker into empty stores."""
        marker = self._index.get(LAYOUT_KEY)
        if marker is not None:
            version, stored_bucket = read_marker(marker)
            if version != LAYOUT_VERSION or stored_bucket is None:
                msg = (
                    f"store '{names[2]}' holds stream-join state in layout {version}; this join "
                    f"reads layout {LAYOUT_VERSION} only"
                )
                raise JoinLayoutError(msg)
            return stored_bucket  # the width the buckets were written with, whatever the config
        for name, store in zip(names, (self._stores[b"l"], self._stores[b"r"], self._index), strict=True):
            with store.all() as entries:
                found = next(entries, None)
            if found is not None:
                msg = (
                    f"store '{name}' holds stream-join state without a layout marker (layout 1, "
                    f"a separate expiry index and registry); this join writes layout "
                    f"{LAYOUT_VERSION}. Keep the old layout for this state (the job's "
                    f"join.state.layout=1), or let the job drain it (end-of-stream on both "
                    f"inputs, then a commit) and delete the stores' state before switching"
                )
                raise JoinLayoutError(msg)
        self._index.put(LAYOUT_KEY, layout_marker(bucket_ms))
        return bucket_ms

    # -------------------------------------------------------------------- join-once decisions

    @property
    def max_decided(self) -> int:
        """The largest event time of a left record decided so far (MIN_MS: none)."""
        return self._max_decided

    @property
    def horizon(self) -> int:
        """Left records before this time are outside the join-once retention (MIN_MS: none)."""
        if self._once is None or self._max_decided == MIN_MS:
            return MIN_MS
        return max(MIN_MS, self._max_decided - self._once)

    def _try_decide(self, decided: bool, time_ms: int, record_id: str) -> bool:
        """As :meth:`JoinRegistry.try_register` answers for a left record at ``time_ms``."""
        if time_ms > self._max_decided:
            self._max_decided = time_ms
            self._index.put(MAX_DECIDED_KEY, encode_ms(time_ms))
        if time_ms < self.horizon:
            if self._too_old is not None:
                self._too_old.inc()
            return False
        if not decided and self._legacy is not None:
            decided = self._legacy(record_id)
        return not decided

    def _duplicate(self) -> None:
        if self._duplicates is not None:
            self._duplicates.inc()

    # -------------------------------------------------------------------------------- adding

    def add_left(self, key: bytes, event_time_ms: int, value: Any, record_id: str) -> list[JoinResult]:
        """Add a left record; its matches with open right records (decided, with join-once)."""
        return self._add(b"l", key, event_time_ms, value, record_id)

    def add_right(self, key: bytes, event_time_ms: int, value: Any, record_id: str) -> list[JoinResult]:
        """Add a right record; its matches with open left records (decided, with join-once)."""
        return self._add(b"r", key, event_time_ms, value, record_id)

    def _add(self, side: bytes, key: bytes, time_ms: int, value: Any, record_id: str) -> list[JoinResult]:
        escaped = escape(key)
        skey = buffer_key(self.bucket_ms, escaped, time_ms, record_id.encode())
        store = self._stores[side]
        once = self._once is not None and side == b"l"
        old = store.get(skey) if once or self._emits[side] else None
        matches, matched = self._match(side, key, escaped, time_ms, value, record_id)
        close_at = time_ms + self._reach(side) + self._grace
        late = close_at < self._watermark.current
        if late:
            if self._late is not None:
                self._late.inc()
            if not matched and self._emits[side]:
                matches = [self._unmatched(side, key, time_ms, value, record_id)]
        if once:
            decided = old is not None and old[:1] == DECIDED
            results = []
            for result in matches:
                if self._try_decide(decided, time_ms, record_id):
                    decided = True
                    results.append(result)
                else:
                    self._duplicate()
            if late:
                if results:  # decided now: remembered as the registry would (one write)
                    store.put(skey, DECIDED + self._encode(value))
                return results
            flag = DECIDED if decided else UNMATCHED
        else:
            if late:
                return matches
            results = matches
            flag = MATCHED if matched else UNMATCHED
            if not matched and old is not None:
                flag = old[:1]
        store.put(skey, flag + self._encode(value))
        if flag == UNMATCHED and old is None and self._emits[side]:
            self._index.put(pending_key(close_at, side, skey), b"")
        return results

    def _match(
        self, side: bytes, key: bytes, escaped: bytes, t: int, value: Any, rid: str
    ) -> tuple[list[JoinResult], bool]:
        """The results of the new record with the open records of the other side; whether any matched.

        With join-once, a match with a decided left record is no result, but a match.
        """
        # the other side's times that match: left tl sees right in [tl - before, tl + after]
        lo, hi = (t - self._before, t + self._after) if side == b"l" else (t - self._after, t + self._before)
        other = b"r" if side == b"l" else b"l"
        store, width = self._stores[other], self.bucket_ms
        found = []
        for bucket in range(bucket_of(lo, width), bucket_of(hi, width) + 1, width):
            prefix = encode_ms(bucket) + escaped
            start, end = max(lo, bucket), min(hi, bucket + width - 1)
            with store.range(prefix + encode_ms(start), prefix + encode_ms(end + 1)) as entries:
                found += [(e.key, e.value) for e in entries]
        if not found:
            return [], False
        wm, reach, n = self._watermark.current, self._reach(other) + self._grace, 8 + len(escaped)
        once_other = self._once is not None and other == b"l"
        results, matched = [], False
        for okey, stored in found:
            other_time = decode_ms(okey, n)
            if other_time + reach < wm:
                continue  # closed: as if already expired
            matched = True
            other_value, other_id = self._decode(stored[1:]), okey[n + 8 :].decode()
            if side == b"l":
                result = self._result(key, value, other_value, t, other_time, rid, other_id)
            else:
                result = self._result(key, other_value, value, other_time, t, other_id, rid)
            flag = stored[:1]
            if once_other:
                if self._try_decide(flag == DECIDED, other_time, other_id):
                    store.put(okey, DECIDED + stored[1:])
                    results.append(result)
                else:
                    self._duplicate()
                continue
            results.append(result)
            if flag == UNMATCHED and self._emits[other]:
                store.put(okey, MATCHED + stored[1:])
        return results, matched

    # ------------------------------------------------------------------------------ expiring

    def expire(self) -> list[JoinResult]:
        """Emit the unmatched records whose window has closed; delete the closed buckets.

        Closed buckets go ``gc_batch`` records per side and call at most (closed records are
        ignored until then, so when they go changes no result).

        The unmatched ones of a left/outer join (decided, with join-once), in (close time,
        side, key, time, record id) order, as ``StreamStreamJoin`` emits them.
        """
        wm = self._watermark.current
        with self._index.range(encode_ms(MIN_MS), until_inclusive(b"", wm - 1)) as entries:
            due = [e.key for e in entries]
        results = []
        for ikey in due:
            side, skey = ikey[8:9], ikey[9:]
            store = self._stores[side]
            stored = store.get(skey)
            if stored is None or stored[:1] != UNMATCHED:
                continue
            user, time_ms, record_id = parse_buffer_key(skey)
            result = self._unmatched(side, user, time_ms, self._decode(stored[1:]), record_id.decode())
            if self._once is not None and side == b"l":
                if not self._try_decide(False, time_ms, record_id.decode()):
                    self._duplicate()
                    continue
                store.put(skey, DECIDED + stored[1:])
            results.append(result)
        if due:
            self._index.delete_all(due)
        for side, store in self._stores.items():
            # records before ``keep_from`` are closed (and, with join-once, past the horizon)
            keep_from = wm - self._reach(side) - self._grace
            if self._once is not None and side == b"l":
                keep_from = min(keep_from, self.horizon)
            if keep_from <= MIN_MS + self.bucket_ms:
                continue
            with store.range(encode_ms(MIN_MS), encode_ms(bucket_of(keep_from, self.bucket_ms))) as entries:
                gone = [e.key for e in islice(entries, self._gc_batch)]
            if gone:
                store.delete_all(gone)
        return results

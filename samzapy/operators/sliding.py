"""Sliding windows (Kafka Streams' ``SlidingWindows``, KIP-450): a window per distinct set of
records of a key that lie at most ``difference_ms`` apart.

A record at ``t`` defines its *left* window ``[t - d, t]`` (it is the window's last record)
and, when another record of the key lies in ``(t, t + d + 1]``, its *right* window
``[t + 1, t + d + 1]`` (the window just after it leaves). Both ends are inclusive, as in
Kafka Streams; a :class:`~samzapy.operators.windows.WindowResult` reports the exclusive end
``end + 1``, as every samzapy window does, so a window's ``end - start`` is ``d + 1``.
Unlike Kafka Streams, times before 0 are windows like any other (no ``[0, d]`` clamp).

A window is closed once its exclusive end is at or before ``watermark - allowed_lateness_ms``;
a record is *late* (dropped) when every window that could hold it has closed, i.e. when
``t + d + 1`` is at or before that bound (Kafka Streams' rule with ``stream time - grace``).

Store layout (``namespace`` + tag)::

    0x00 'sb' + escape(key) + t             -> aggregate of the key's records at t (buckets)
    0x00 'sx' + (t + d + 1) + escape(key) + t -> b""   (bucket expiry index)
    0x00 'sw' + escape(key) + start         -> aggregate of the window [start, start + d]
    0x00 'se' + (start + d + 1) + escape(key) + start -> b""   (close index)

A new window's aggregate is the merge of the buckets it covers, so it does not depend on the
order the records arrived in; an existing open window is updated with the aggregator's
``add``. A bucket goes once no open window can cover it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from samzapy.metrics import MetricsGroup
from samzapy.operators.aggregators import Aggregator
from samzapy.operators.emission import EarlyFiring, early_id
from samzapy.operators.ids import window_id
from samzapy.operators.keys import decode_ms, encode_ms, escape, unescape, until_inclusive
from samzapy.operators.watermark import Watermark
from samzapy.operators.windows import Added, WindowResult
from samzapy.stores.base import KeyValueStore

BUCKET_TAG = b"\x00sb"
BUCKET_EXPIRY_TAG = b"\x00sx"
WINDOW_TAG = b"\x00sw"
CLOSE_TAG = b"\x00se"

_ACCEPTED = Added([], late=False)
_LATE = Added([], late=True)


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    """Sliding windows of records at most ``difference_ms`` apart (both ends inclusive)."""

    difference_ms: int

    def __post_init__(self) -> None:
        if self.difference_ms < 0:
            msg = f"difference_ms must be >= 0, got {self.difference_ms}"
            raise ValueError(msg)


class SlidingAggregation:
    """Aggregates values per key in sliding windows kept in a store (see the module).

    Promises:
        * :meth:`close_due` returns every closed window once, ordered by (end, key, start),
          with its :func:`~samzapy.operators.ids.window_id` as id, and deletes it; re-emitted
          after a crash with the same id and bytes.
        * With ``emit="update"``, :meth:`add` returns the new value of every window it changed
          or created (``final=False``; ``late=True`` for windows whose end the watermark
          plus ``watermark_lateness_ms`` had passed: revisions inside the allowed lateness).
        * With ``early_fire_ms``, :meth:`fire_early` returns the changed windows' values every
          that many ms of processing time (:class:`~samzapy.operators.emission.EarlyFiring`).
        * Same inputs in the same order (and the same watermark moves) give the same results;
          the set of windows and their final values do not depend on the order of on-time
          records.
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        windows: SlidingWindows,
        aggregator: Aggregator,
        watermark: Watermark,
        *,
        allowed_lateness_ms: int = 0,
        watermark_lateness_ms: int = 0,
        emit: Literal["final", "update"] = "final",
        early_fire_ms: int = 0,
        namespace: bytes = b"",
        metrics: MetricsGroup | None = None,
    ) -> None:
        if emit not in ("final", "update"):
            msg = f"emit must be 'final' or 'update', got {emit!r}"
            raise ValueError(msg)
        self._store = store
        self._d = windows.difference_ms
        self._agg = aggregator
        self._watermark = watermark
        self._grace = allowed_lateness_ms
        self._behind = watermark_lateness_ms
        self._updates = emit == "update"
        self._b, self._x = namespace + BUCKET_TAG, namespace + BUCKET_EXPIRY_TAG
        self._w, self._e = namespace + WINDOW_TAG, namespace + CLOSE_TAG
        self._early = None
        if early_fire_ms:
            self._early = EarlyFiring(store, early_fire_ms, self._read_window, namespace=namespace)
        self._late = metrics.counter("late-messages") if metrics is not None else None
        self._scan_from: dict[bytes, bytes] = {}

    def closed_before(self) -> int:
        """Windows with an (exclusive) end at or before this value are closed."""
        return self._watermark.current - self._grace

    def add(self, key: bytes, event_time_ms: int, value: Any) -> Added:
        """Add ``value`` at ``event_time_ms`` to the open sliding windows of ``key``."""
        t, d, bound = event_time_ms, self._d, self.closed_before()
        if t + d + 1 <= bound:
            if self._late is not None:
                self._late.inc()
            return _LATE
        escaped = escape(key)
        self._add_bucket(escaped, t, value)
        changed, existing = self._update_existing(escaped, t, value, bound)
        changed += self._create_new(escaped, t, existing, bound)
        if self._early is not None:
            for start, _ in changed:
                self._early.mark(escaped + encode_ms(start))
        if not self._updates:
            return _ACCEPTED
        return Added([self._result(key, start, acc, final=False) for start, acc in changed], late=False)

    def _add_bucket(self, escaped: bytes, t: int, value: Any) -> None:
        bkey = self._b + escaped + encode_ms(t)
        old = self._store.get(bkey)
        agg = self._agg
        acc = agg.create(value) if old is None else agg.add(agg.decode(old), value)
        self._store.put(bkey, agg.encode(acc))
        if old is None:
            self._store.put(self._x + encode_ms(t + self._d + 1) + escaped + encode_ms(t), b"")

    def _update_existing(
        self, escaped: bytes, t: int, value: Any, bound: int
    ) -> tuple[list[tuple[int, Any]], set[int]]:
        """Add the value to the key's open windows that hold ``t`` (start in [t - d, t]);
        returns (start, aggregate) of each, and the starts of all (closed ones too)."""
        prefix, agg, d = self._w + escaped, self._agg, self._d
        with self._store.range(prefix + encode_ms(t - d), prefix + encode_ms(t + 1)) as entries:
            existing = [(e.key, e.value) for e in entries]
        changed: list[tuple[int, Any]] = []
        starts = set()
        for wkey, stored in existing:
            start = decode_ms(wkey, len(prefix))
            starts.add(start)
            if start + d + 1 <= bound:
                continue  # closed: the record does not count in it
            acc = agg.add(agg.decode(stored), value)
            self._store.put(wkey, agg.encode(acc))
            changed.append((start, acc))
        return changed, starts

    def _create_new(self, escaped: bytes, t: int, existing: set[int], bound: int) -> list[tuple[int, Any]]:
        """Create the windows ``t`` brings into being: its left window, its right window (when
        a later record is near) and its predecessor's right window (which now holds ``t``)."""
        d = self._d
        prefix = self._b + escaped
        with self._store.range(prefix + encode_ms(t - d - 1), prefix + encode_ms(t + d + 2)) as it:
            buckets = [(decode_ms(k, len(prefix)), v) for k, v in it]
        before = [b for b, _ in buckets if b < t]
        starts = [t - d]
        if any(t < b <= t + d + 1 for b, _ in buckets):
            starts.append(t + 1)
        if before:
            starts.append(before[-1] + 1)
        created: list[tuple[int, Any]] = []
        for start in sorted(set(starts)):
            if start in existing or start + d + 1 <= bound:
                continue
            wkey = self._w + escaped + encode_ms(start)
            if start > t and self._store.get(wkey) is not None:
                continue  # the right window of t exists already (and does not hold t)
            acc = self._merge([v for b, v in buckets if start <= b <= start + d])
            close = self._e + encode_ms(start + d + 1) + escaped + encode_ms(start)
            self._store.put_all([(wkey, self._agg.encode(acc)), (close, b"")])
            created.append((start, acc))
        return created

    def _merge(self, encoded: list[bytes]) -> Any:
        agg = self._agg
        acc = agg.decode(encoded[0])
        for value in encoded[1:]:
            acc = agg.merge(acc, agg.decode(value))
        return acc

    def _result(self, key: bytes, start: int, acc: Any, *, final: bool) -> WindowResult:
        end = start + self._d + 1
        if final:
            return WindowResult(key, start, end, self._agg.result(acc), window_id(key, start, end))
        late = end <= self._watermark.current + self._behind
        return WindowResult(key, start, end, self._agg.result(acc), None, final=False, late=late)

    def close_due(self, limit: int | None = None) -> list[WindowResult]:
        """Emit and purge the first ``limit`` closed windows (all with ``None``), ordered by
        (end, key, start); drop the buckets no open window can need any more."""
        bound = self.closed_before()
        due = self._due(self._e, bound, limit)
        n, results, deletes = len(self._e), [], list(due)
        for ikey in due:
            key, offset = unescape(ikey, n + 8)
            start = decode_ms(ikey, offset)
            wkey = self._w + ikey[n + 8 :]
            stored = self._store.get(wkey)
            if stored is not None:
                results.append(self._result(key, start, self._agg.decode(stored), final=True))
                deletes.append(wkey)
                if self._early is not None:
                    deletes.append(self._early.marker(ikey[n + 8 :]))
        if deletes:
            self._store.delete_all(deletes)
        self._expire_buckets(bound)
        return results

    def _expire_buckets(self, bound: int) -> None:
        n = len(self._x) + 8
        while due := self._due(self._x, bound, 10_000):
            self._store.delete_all(due + [self._b + k[n:] for k in due])

    def _due(self, prefix: bytes, bound: int, limit: int | None) -> list[bytes]:
        """The first ``limit`` keys of the time-first index ``prefix`` due at ``bound``; the
        caller deletes them all. The scan starts where the last one ended (as
        :meth:`WindowedAggregation._due <samzapy.operators.windows.WindowedAggregation>`
        does, for the same reason: deleted entries stay as RocksDB tombstones until
        compaction): nothing is written behind the bound again, since a new window or bucket
        that would be due already is late."""
        end = until_inclusive(prefix, bound)
        start = self._scan_from.get(prefix, prefix)
        if start >= end:
            return []
        with self._store.range(start, end) as entries:
            due = [k for k, _ in islice(entries, limit)]
        self._scan_from[prefix] = due[-1] + b"\x00" if limit is not None and len(due) == limit else end
        return due

    def fire_early(self, now_ms: int) -> list[WindowResult]:
        """Early results (see the class); ``[]`` without ``early_fire_ms``."""
        return [] if self._early is None else self._early.fire(now_ms)

    def _read_window(self, suffix: bytes) -> WindowResult | None:
        stored = self._store.get(self._w + suffix)
        if stored is None:
            return None
        key, offset = unescape(suffix)
        result = self._result(key, decode_ms(suffix, offset), self._agg.decode(stored), final=False)
        result.id = early_id(window_id(key, result.start, result.end), stored, late=result.late)
        return result

    def open_windows(self, key: bytes) -> list[WindowResult]:
        """The key's windows still in the store, by start (current values, ``final=False``)."""
        prefix = self._w + escape(key)
        with self._store.range(prefix, prefix + b"\xff" * 9) as entries:
            found = [(decode_ms(k, len(prefix)), v) for k, v in entries]
        return [self._result(key, start, self._agg.decode(v), final=False) for start, v in found]

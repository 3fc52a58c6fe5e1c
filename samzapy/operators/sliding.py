"""Sliding windows (Kafka Streams' ``SlidingWindows``, KIP-450).

A window per distinct set of records of a key that lie at most ``difference_ms`` apart.

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

    0x00 'sk' + escape(key)  ->  the key's state: its buckets (the aggregate of its records
                                 at each distinct time t) and its open windows (start ->
                                 aggregate of [start, start + d]), packed (:func:`pack`)
    0x00 'se' + (start + d + 1) + escape(key) + start -> b""   (close index)
    0x00 'sx' + (t + d + 1) + escape(key) + t         -> b""   (bucket expiry index)

A record is one get and one put of its key's state (absorbed by the object cache: a range
scan per record would write the cache's dirty entries down every time), plus an index put
per new window or bucket. A new window's aggregate is the merge of the buckets it covers,
so it does not depend on the order the records arrived in; an existing open window is
updated with the aggregator's ``add``. A bucket goes once no open window can cover it.

>>> unpack(pack({5: b"1"}, {0: b"2"}))
({5: b'1'}, {0: b'2'})
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from samzapy.metrics import MetricsGroup
from samzapy.operators.aggregators import Aggregator
from samzapy.operators.emission import EarlyFiring, early_id
from samzapy.operators.key_encoding import decode_ms, encode_ms, escape, unescape, until_inclusive
from samzapy.operators.watermark import Watermark
from samzapy.operators.windows import Added, WindowResult
from samzapy.output_ids import window_id
from samzapy.stores.base import KeyValueStore

STATE_TAG = b"\x00sk"
BUCKET_EXPIRY_TAG = b"\x00sx"
CLOSE_TAG = b"\x00se"

_ACCEPTED = Added([], late=False)
_LATE = Added([], late=True)

Buckets = dict[int, bytes]
Windows = dict[int, bytes]


def pack(buckets: Buckets, windows: Windows) -> bytes:
    """A key's state as bytes.

    ``b``/``w`` + time (8 bytes) + length (4) + aggregate, buckets then windows, each by time
    (so the same state always has the same bytes).
    """
    parts = []
    for tag, entries in ((b"b", buckets), (b"w", windows)):
        for time_ms in sorted(entries):
            encoded = entries[time_ms]
            parts.append(tag + encode_ms(time_ms) + len(encoded).to_bytes(4, "big") + encoded)
    return b"".join(parts)


def unpack(data: bytes | None) -> tuple[Buckets, Windows]:
    """The (buckets, windows) that :func:`pack` wrote (empty for ``None``)."""
    buckets: Buckets = {}
    windows: Windows = {}
    i = 0
    while data is not None and i < len(data):
        length = int.from_bytes(data[i + 9 : i + 13], "big")
        target = buckets if data[i : i + 1] == b"b" else windows
        target[decode_ms(data, i + 1)] = data[i + 13 : i + 13 + length]
        i += 13 + length
    return buckets, windows


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
          with its :func:`~samzapy.output_ids.window_id` as id, and deletes it; re-emitted
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
        self._k, self._e = namespace + STATE_TAG, namespace + CLOSE_TAG
        self._x = namespace + BUCKET_EXPIRY_TAG
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
        buckets, windows = unpack(self._store.get(self._k + escaped))
        self._add_bucket(buckets, escaped, t, value)
        changed = self._update_existing(windows, t, value, bound)
        changed += self._create_new(buckets, windows, escaped, t, bound)
        self._store.put(self._k + escaped, pack(buckets, windows))
        if self._early is not None:
            for start, _ in changed:
                self._early.mark(escaped + encode_ms(start))
        if not self._updates:
            return _ACCEPTED
        return Added([self._result(key, start, acc, final=False) for start, acc in changed], late=False)

    def _add_bucket(self, buckets: Buckets, escaped: bytes, t: int, value: Any) -> None:
        agg, old = self._agg, buckets.get(t)
        buckets[t] = agg.encode(agg.create(value) if old is None else agg.add(agg.decode(old), value))
        if old is None:
            self._store.put(self._x + encode_ms(t + self._d + 1) + escaped + encode_ms(t), b"")

    def _update_existing(self, windows: Windows, t: int, value: Any, bound: int) -> list[tuple[int, Any]]:
        """Add the value to the key's open windows that hold ``t`` (start in [t - d, t]).

        Returns (start, aggregate) of each. A closed window not yet emitted is left as it is.
        """
        agg, d = self._agg, self._d
        changed: list[tuple[int, Any]] = []
        for start in sorted(s for s in windows if t - d <= s <= t and s + d + 1 > bound):
            acc = agg.add(agg.decode(windows[start]), value)
            windows[start] = agg.encode(acc)
            changed.append((start, acc))
        return changed

    def _create_new(
        self, buckets: Buckets, windows: Windows, escaped: bytes, t: int, bound: int
    ) -> list[tuple[int, Any]]:
        """Create the windows ``t`` brings into being.

        Its left window, its right window (when a later record is near) and its predecessor's
        right window (which now holds ``t``).
        """
        d = self._d
        near = sorted(b for b in buckets if t - d - 1 <= b <= t + d + 1)
        starts = {t - d}
        if any(t < b for b in near):
            starts.add(t + 1)
        before = [b for b in near if b < t]
        if before:
            starts.add(before[-1] + 1)
        created: list[tuple[int, Any]] = []
        for start in sorted(starts):
            if start in windows or start + d + 1 <= bound:
                continue  # exists (and took the record if it holds t), or closed already
            acc = self._merge([buckets[b] for b in near if start <= b <= start + d])
            windows[start] = self._agg.encode(acc)
            self._store.put(self._e + encode_ms(start + d + 1) + escaped + encode_ms(start), b"")
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
        """Emit and purge the first ``limit`` closed windows.

        Emit and purge the first ``limit`` closed windows (all with ``None``), ordered by (end,
        key, start); drop the buckets no open window can need any more.
        """
        bound = self.closed_before()
        due = self._due(self._e, bound, limit)
        n, results = len(self._e), []
        states: dict[bytes, tuple[Buckets, Windows]] = {}
        deletes = list(due)
        for ikey in due:
            key, offset = unescape(ikey, n + 8)
            escaped = ikey[n + 8 : offset]
            if escaped not in states:
                states[escaped] = unpack(self._store.get(self._k + escaped))
            start = decode_ms(ikey, offset)
            stored = states[escaped][1].pop(start, None)
            if stored is not None:
                results.append(self._result(key, start, self._agg.decode(stored), final=True))
                if self._early is not None:
                    deletes.append(self._early.marker(ikey[n + 8 :]))
        self._save(states)
        if deletes:
            self._store.delete_all(deletes)
        self._expire_buckets(bound)
        return results

    def _save(self, states: dict[bytes, tuple[Buckets, Windows]]) -> None:
        """Write the changed key states back (deleting the empty ones)."""
        for escaped, (buckets, windows) in states.items():
            if buckets or windows:
                self._store.put(self._k + escaped, pack(buckets, windows))
            else:
                self._store.delete(self._k + escaped)

    def _expire_buckets(self, bound: int) -> None:
        n = len(self._x) + 8
        while due := self._due(self._x, bound, 10_000):
            states: dict[bytes, tuple[Buckets, Windows]] = {}
            for xkey in due:
                _, offset = unescape(xkey, n)
                escaped = xkey[n:offset]
                if escaped not in states:
                    states[escaped] = unpack(self._store.get(self._k + escaped))
                states[escaped][0].pop(decode_ms(xkey, offset), None)
            self._save(states)
            self._store.delete_all(due)

    def _due(self, prefix: bytes, bound: int, limit: int | None) -> list[bytes]:
        """The first ``limit`` keys of the time-first index ``prefix`` due at ``bound``.

        The caller deletes them all. The scan starts where the last one ended (as
        :meth:`WindowedAggregation._due <samzapy.operators.windows.WindowedAggregation>` does,
        for the same reason: deleted entries stay as RocksDB tombstones until compaction):
        nothing is written behind the bound again, since a new window or bucket that would be
        due already is late.
        """
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
        key, offset = unescape(suffix)
        stored = unpack(self._store.get(self._k + suffix[:offset]))[1].get(decode_ms(suffix, offset))
        if stored is None:
            return None
        result = self._result(key, decode_ms(suffix, offset), self._agg.decode(stored), final=False)
        result.id = early_id(window_id(key, result.start, result.end), stored, late=result.late)
        return result

    def open_windows(self, key: bytes) -> list[WindowResult]:
        """The key's windows still in the store, by start (current values, ``final=False``)."""
        windows = unpack(self._store.get(self._k + escape(key)))[1]
        return [self._result(key, s, self._agg.decode(windows[s]), final=False) for s in sorted(windows)]

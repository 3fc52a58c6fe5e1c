"""Event-time windows in a store: tumbling, hopping and session windows, emitted once final.

The store layout is :mod:`samzapy.operators.window_layout`: one time-first entry per
tumbling or hopping window (an event is a get and a put; the due windows are one range scan,
values included); sessions key-first with an index of ends.

Nothing is kept in Python memory: after a restore, a new :class:`WindowedAggregation` over
the same store continues exactly where the checkpointed state left off.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from samzapy.metrics import MetricsGroup
from samzapy.operators.aggregators import Aggregator
from samzapy.operators.emission import EarlyFiring, early_id
from samzapy.operators.key_encoding import (
    MIN_MS,
    decode_ms,
    encode_ms,
    escape,
    prefix_end,
    unescape,
    until_inclusive,
)
from samzapy.operators.watermark import Watermark
from samzapy.operators.window_layout import (
    FIXED_TAG,
    SESSION_INDEX_TAG,
    SESSION_TAG,
    decode_fixed_key,
    migrate_fixed,
)
from samzapy.output_ids import window_id
from samzapy.stores.base import KeyValueStore


@dataclass(frozen=True, slots=True)
class TumblingWindows:
    """Fixed, non-overlapping windows ``[start, start + size)`` aligned to ``offset_ms``.

    >>> TumblingWindows(3_600_000).assign(5_400_000)
    [(3600000, 7200000)]
    """

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _check_positive("size_ms", self.size_ms)

    def assign(self, time_ms: int) -> list[tuple[int, int]]:
        """The (start, end) of the window holding ``time_ms``."""
        start = time_ms - (time_ms - self.offset_ms) % self.size_ms
        return [(start, start + self.size_ms)]


@dataclass(frozen=True, slots=True)
class HoppingWindows:
    """Windows of ``size_ms`` starting every ``advance_ms``.

    An event is in every window that covers it, returned by ascending start.

    >>> HoppingWindows(10, 5).assign(12)
    [(5, 15), (10, 20)]
    """

    size_ms: int
    advance_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _check_positive("size_ms", self.size_ms)
        _check_positive("advance_ms", self.advance_ms)
        if self.advance_ms > self.size_ms:
            msg = f"advance_ms ({self.advance_ms}) must be <= size_ms ({self.size_ms}), or events are lost"
            raise ValueError(msg)

    def assign(self, time_ms: int) -> list[tuple[int, int]]:
        """The (start, end) of every window holding ``time_ms``."""
        last = time_ms - (time_ms - self.offset_ms) % self.advance_ms
        first = last - ((self.size_ms - 1) // self.advance_ms) * self.advance_ms
        return [
            (s, s + self.size_ms)
            for s in range(first, last + 1, self.advance_ms)
            if s + self.size_ms > time_ms
        ]


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Sessions of activity.

    An event at ``t`` covers ``[t, t + gap)`` and overlapping sessions of a key merge, so a
    session is ``[first event, last event + gap)`` and two events are in the same session when
    less than ``gap_ms`` separates them (directly or through events between them).
    """

    gap_ms: int

    def __post_init__(self) -> None:
        _check_positive("gap_ms", self.gap_ms)


Assigner = TumblingWindows | HoppingWindows | SessionWindows


@dataclass(slots=True)
class WindowResult:
    """An emitted window.

    Read-only by convention: not frozen, because a frozen dataclass's ``__init__`` was a
    measurable share of emitting many windows.

    Attributes:
        key: the window's key.
        start: inclusive start in ms.
        end: exclusive end in ms.
        value: the aggregator's result.
        id: for final results, :func:`samzapy.output_ids.window_id` of (key, start, end),
            the same on every re-emission; ``None`` for updates (the collector then derives
            the id from the input offset, which is deterministic too).
        final: False for ``emit="update"`` and early emissions.
        late: True for an update or early emission of a window whose end the event-time
            progress had already passed (the window was due, and is revised by a record
            inside the allowed lateness); always False for final results.
        window: the window's id when it is not ``window_id(key, start, end)`` (count
            windows), for non-final results too: what downstream upserts by.
    """

    key: bytes
    start: int
    end: int
    value: Any
    id: str | None
    final: bool = True
    late: bool = False
    window: str | None = None


@dataclass(frozen=True, slots=True)
class Added:
    """What :meth:`WindowedAggregation.add` did with an event.

    Attributes:
        updates: update emissions (only with ``emit="update"``); read-only (an empty one may
            be shared between calls).
        late: True when the event was dropped because every window it belongs to had closed;
            the task should send it to its late stream (it was counted in ``late-messages``).
    """

    updates: list[WindowResult]
    late: bool


#: What :meth:`WindowedAggregation.add` returns when it has no update to emit; shared
#: instances (a frozen dataclass per event was a measurable share of the window count), so
#: their ``updates`` list must not be changed.
_ACCEPTED = Added([], late=False)
_LATE = Added([], late=True)


class WindowedAggregation:
    """Aggregates values per (key, window) in a store and emits each window once, when final.

    Promises:
        * A window ``[start, end)`` is *closed* once ``end + allowed_lateness_ms <= watermark``
          (``allowed_lateness_ms`` is extra grace on top of the watermark's own lateness).
          Events only go into open windows; an event with no open window left is *late*:
          ``add`` returns ``late=True`` and counts it in ``late-messages`` (hopping windows
          that drop an event for some of its windows only count those in
          ``late-window-drops``). Closed windows still in the store are ignored, so results
          do not depend on when :meth:`close_due` runs.
        * :meth:`close_due` returns every closed window once, ordered by (end, key, start), and
          deletes it in the same call. On a crash before the next checkpoint the store is
          restored to the checkpointed state and the window is emitted again with the same id
          and bytes (outputs are flushed before a checkpoint is written): a window may be
          emitted more than once across crashes, but never lost.
        * Same inputs in the same order (and the same watermark moves) give the same results.

    Session windows: an event whose ``[t, t + gap)`` overlaps open sessions of its key merges
    them into one session (aggregates merged in start order, then the value added); the
    merged session replaces them in the store and index.

    Building one over a store that holds fixed windows in the layout of samzapy before
    round 3 moves them to the current layout first
    (:func:`~samzapy.operators.window_layout.migrate_fixed`).
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        assigner: Assigner,
        aggregator: Aggregator,
        watermark: Watermark,
        *,
        allowed_lateness_ms: int = 0,
        emit: Literal["final", "update"] = "final",
        early_fire_ms: int = 0,
        watermark_lateness_ms: int = 0,
        namespace: bytes = b"",
        metrics: MetricsGroup | None = None,
    ) -> None:
        if emit not in ("final", "update"):
            msg = f"emit must be 'final' or 'update', got {emit!r}"
            raise ValueError(msg)
        if allowed_lateness_ms < 0:
            msg = f"allowed_lateness_ms must be >= 0, got {allowed_lateness_ms}"
            raise ValueError(msg)
        self._store = store
        self._assigner = assigner
        self._agg = aggregator
        self._watermark = watermark
        self._grace = allowed_lateness_ms
        self._updates = emit == "update"
        # How far the watermark trails event-time progress: update and early emissions of a
        # window whose end progress has passed are revisions inside the lateness (late=True).
        self._behind = watermark_lateness_ms
        self._early: EarlyFiring | None = None
        if early_fire_ms:
            self._early = EarlyFiring(store, early_fire_ms, self._read_window, namespace=namespace)
        self._wprefix = namespace + SESSION_TAG
        self._iprefix = namespace + SESSION_INDEX_TAG
        self._tprefix = namespace + FIXED_TAG
        self._session = isinstance(assigner, SessionWindows)
        # Tumbling windows are assigned inline (no list per event); hopping ones by the assigner.
        self._tumbling: tuple[int, int] | None = None
        if isinstance(assigner, TumblingWindows):
            self._tumbling = (assigner.size_ms, assigner.offset_ms)
        # (prefix + end, start) encoded, per window start: most events fall in a few windows.
        self._encoded: dict[int, tuple[bytes, bytes]] = {}
        # Per time-first prefix, where the next scan for due windows starts (see _due).
        self._scan_from: dict[bytes, bytes] = {}
        self._late = metrics.counter("late-messages") if metrics is not None else None
        self._late_windows = metrics.counter("late-window-drops") if metrics is not None else None
        if not self._session:
            migrate_fixed(store, namespace)

    def closed_before(self) -> int:
        """Windows with ``end <=`` this value are closed."""
        return self._watermark.current - self._grace

    def add(self, key: bytes, event_time_ms: int, value: Any, closed_before: int | None = None) -> Added:
        """Add ``value`` at ``event_time_ms`` to the open windows of ``key``.

        ``closed_before`` (tumbling and hopping windows): for this event, windows ending at or
        before it count as closed too, e.g. a bound from the event's own source, so that which
        windows take it does not depend on how far the watermark happened to be.
        """
        if self._session:
            return self._add_session(key, event_time_ms, value, self._assigner.gap_ms)  # type: ignore[union-attr]
        bound = self._watermark.current - self._grace
        if closed_before is not None and closed_before > bound:
            bound = closed_before
        escaped = escape(key)
        tumbling = self._tumbling
        if tumbling is not None:
            size, offset = tumbling
            start = event_time_ms - (event_time_ms - offset) % size
            if start + size <= bound:
                return self._added([], late=True)
            acc = self._update(escaped, start, start + size, value)
            if not self._updates:
                return _ACCEPTED  # the common case: no allocation per event
            return Added([self._revision(key, start, start + size, acc)], late=False)
        updates: list[WindowResult] = []
        accepted = dropped = 0
        for start, end in self._assigner.assign(event_time_ms):  # type: ignore[union-attr]
            if end <= bound:
                dropped += 1
                continue
            accepted += 1
            acc = self._update(escaped, start, end, value)
            if self._updates:
                updates.append(self._revision(key, start, end, acc))
        return self._added(updates, late=accepted == 0, dropped=dropped)

    def _update(self, escaped: bytes, start: int, end: int, value: Any) -> Any:
        encoded = self._encoded.get(start)
        if encoded is None:
            if len(self._encoded) >= 64:
                self._encoded.clear()  # bounded: old windows are not seen again
            encoded = self._encoded[start] = (self._tprefix + encode_ms(end), encode_ms(start))
        wkey = encoded[0] + escaped + encoded[1]
        store, agg = self._store, self._agg
        old = store.get(wkey)
        acc = agg.create(value) if old is None else agg.add(agg.decode(old), value)
        store.put(wkey, agg.encode(acc))
        if self._early is not None:
            self._early.mark(wkey[len(self._tprefix) :])
        return acc

    def _revision(self, key: bytes, start: int, end: int, acc: Any) -> WindowResult:
        """A non-final emission of a window's current value (see ``late`` in WindowResult)."""
        late = end <= self._watermark.current + self._behind
        return WindowResult(key, start, end, self._agg.result(acc), None, final=False, late=late)

    def fire_early(self, now_ms: int) -> list[WindowResult]:
        """The early firings due now (``[]`` without early firing).

        The changed open windows' current values every ``early_fire_ms`` of processing time
        (:class:`~samzapy.operators.emission.EarlyFiring`); ``[]`` without it.
        """
        return [] if self._early is None else self._early.fire(now_ms)

    def _read_window(self, suffix: bytes) -> WindowResult | None:
        """The early result of the window stored under its prefix + ``suffix``, if still open."""
        if self._session:
            stored = self._store.get(self._wprefix + suffix)
            if stored is None:
                return None
            key, offset = unescape(suffix)
            start, end, encoded = decode_ms(suffix, offset), decode_ms(stored), stored[8:]
        else:
            found = self._store.get(self._tprefix + suffix)
            if found is None:
                return None
            encoded = found
            key, start, end = decode_fixed_key(suffix, 0)
        if end <= self.closed_before():
            return None  # closed: its final result is (or will be) emitted by close_due
        result = self._revision(key, start, end, self._agg.decode(encoded))
        result.id = early_id(window_id(key, start, end), encoded, late=result.late)
        return result

    def _added(self, updates: list[WindowResult], *, late: bool, dropped: int = 0) -> Added:
        if late:
            if self._late is not None:
                self._late.inc()
        elif dropped and self._late_windows is not None:
            self._late_windows.inc(dropped)
        if not updates:
            return _LATE if late else _ACCEPTED
        return Added(updates, late)

    def _add_session(self, key: bytes, time_ms: int, value: Any, gap: int) -> Added:
        bound = self.closed_before()
        start, end = time_ms, time_ms + gap
        escaped = escape(key)
        prefix = self._wprefix + escaped
        # Sessions of the key starting before ``end``; those ending after ``time_ms`` overlap.
        with self._store.range(prefix + encode_ms(MIN_MS), prefix + encode_ms(end)) as entries:
            overlapping = [(e.key, e.value) for e in entries if decode_ms(e.value) > max(time_ms, bound)]
        if not overlapping and end <= bound:
            return self._added([], late=True)
        acc: Any = None
        writes: list[tuple[bytes, bytes | None]] = []
        n = len(self._wprefix)
        for wkey, stored in overlapping:
            old_start, old_end = decode_ms(wkey, len(prefix)), decode_ms(stored)
            old_acc = self._agg.decode(stored[8:])
            acc = old_acc if acc is None else self._agg.merge(acc, old_acc)
            start, end = min(start, old_start), max(end, old_end)
            writes += [(wkey, None), (self._iprefix + stored[:8] + wkey[n:], None)]
            if self._early is not None:
                writes.append((self._early.marker(wkey[n:]), None))
        acc = self._agg.create(value) if acc is None else self._agg.add(acc, value)
        suffix = escaped + encode_ms(start)
        index = {self._iprefix + encode_ms(end) + suffix: b""}
        puts = {self._wprefix + suffix: encode_ms(end) + self._agg.encode(acc), **index}
        writes = [(k, v) for k, v in writes if k not in puts] + list(puts.items())
        self._store.put_all(writes)
        if self._early is not None:
            self._early.mark(suffix)
        updates = [self._revision(key, start, end, acc)] if self._updates else []
        return self._added(updates, late=False)

    def close_due(self, limit: int | None = None) -> list[WindowResult]:
        """Emit and purge every closed window (see the class docstring).

        With ``limit``, only the first ``limit`` closed windows (in the same order) are emitted
        and purged; call again until it returns ``[]``. This bounds the memory a call holds
        when very many windows close at once (e.g. at end-of-stream), whatever the state size.
        """
        if not self._session:
            return self._close_fixed(limit)
        while True:
            results, scanned = self._close_sessions(limit)
            # A full batch of stale index entries only: look further, or windows would wait.
            if results or limit is None or scanned < limit:
                return results

    def _due(self, prefix: bytes, limit: int | None) -> list[tuple[bytes, bytes]]:
        """The first ``limit`` entries under the time-first ``prefix`` that are due.

        The caller deletes every one of them.

        The scan starts where the last one ended, not at the smallest time: the closed
        windows' deletes stay in RocksDB as tombstones until compaction, and a seek to the
        start would step over all of them at every call (seconds per scan after a few hundred
        thousand windows). Nothing is ever stored behind that point again: an event for a
        window that ends at or before ``closed_before()`` is late, and that bound never goes
        back. After a restart the first scan starts at the beginning.
        """
        bound = until_inclusive(prefix, self.closed_before())
        start = self._scan_from.get(prefix, prefix)
        if start >= bound:
            return []
        with self._store.range(start, bound) as it:
            # Its entries, not it: one frame (its ``__next__``) less per window; ``with`` closes it.
            due: list[tuple[bytes, bytes]] = list(islice(it.entries, limit))
        # The smallest key after the last one returned (all are deleted), or the bound itself.
        self._scan_from[prefix] = due[-1][0] + b"\x00" if limit is not None and len(due) == limit else bound
        return due

    def _close_fixed(self, limit: int | None) -> list[WindowResult]:
        """One scan of the due fixed windows (values included), then one batch of deletes."""
        prefix = self._tprefix
        scanned_from = self._scan_from.get(prefix, prefix)
        due = self._due(prefix, limit)
        if not due:
            return []
        n, result, decode = len(prefix), self._agg.result, self._agg.decode
        results: list[WindowResult] = []
        # The windows due in one scan mostly share their end and start: each distinct pair is
        # decoded (and its id's tail formatted) once. A key is prefix + end + escape(key) +
        # start (window_layout), so the escaped key ends 10 bytes before the stored key does.
        times: dict[bytes, tuple[int, int, str]] = {}
        append, no_zero = results.append, b"\x00"
        for stored_key, stored in due:
            pair = stored_key[n : n + 8] + stored_key[-8:]
            found = times.get(pair)
            if found is None:
                end, start = decode_ms(pair), decode_ms(pair, 8)
                found = times[pair] = (start, end, f":{start}:{end}")
            key = stored_key[n + 8 : -10]
            if no_zero in key:
                key = key.replace(b"\x00\xff", b"\x00")
            start, end, tail = found
            append(WindowResult(key, start, end, result(decode(stored)), f"w:{key.hex()}{tail}"))
        deletes = [stored_key for stored_key, _ in due]
        if self._early is not None:
            deletes += [self._early.marker(k[n:]) for k in deletes]
            self._store.delete_all(deletes)
        else:
            # ``due`` is every entry from where the scan started to where the next one starts
            # (``_due``): the store may delete that range as one (a RocksDB range tombstone).
            self._store.delete_scanned(deletes, scanned_from, self._scan_from[prefix])
        return results

    def _close_sessions(self, limit: int | None) -> tuple[list[WindowResult], int]:
        """Emit and purge the first ``limit`` due session index entries; (results, entries scanned)."""
        prefix = self._iprefix
        due = [index_key for index_key, _ in self._due(prefix, limit)]
        if not due:
            return [], 0
        results: list[WindowResult] = []
        deletes = list(due)
        n = len(prefix)
        for ikey in due:
            suffix = ikey[n + 8 :]
            wkey = self._wprefix + suffix
            stored = self._store.get(wkey)
            if stored is None or stored[:8] != ikey[n : n + 8]:
                continue  # a stale index entry: its session is gone or has another end
            key, offset = unescape(suffix)
            start, end = decode_ms(suffix, offset), decode_ms(stored)
            value = self._agg.result(self._agg.decode(stored[8:]))
            results.append(WindowResult(key, start, end, value, window_id(key, start, end)))
            deletes.append(wkey)
            if self._early is not None:
                deletes.append(self._early.marker(suffix))
        self._store.delete_all(deletes)
        return results, len(due)

    def open_windows(self, key: bytes) -> list[WindowResult]:
        """The windows of ``key`` still in the store, by start.

        Current values, ``final=False``; may include closed windows not yet purged by
        :meth:`close_due`.

        For tumbling and hopping windows this scans every window in the store (the layout is
        time-first): meant for tests and tools, not for the per-event path.
        """
        agg = self._agg
        if not self._session:
            prefix = self._tprefix
            with self._store.range(prefix, prefix_end(prefix)) as entries:
                found = [decode_fixed_key(k, len(prefix)) + (v,) for k, v in entries]
            return [
                WindowResult(k, start, end, agg.result(agg.decode(v)), None, False)
                for k, start, end, v in sorted(found, key=lambda w: w[1])
                if k == key
            ]
        prefix = self._wprefix + escape(key)
        with self._store.range(prefix + encode_ms(MIN_MS), prefix + b"\xff" * 9) as entries:
            found_sessions = [(e.key, e.value) for e in entries]
        n = len(prefix)
        return [
            WindowResult(key, decode_ms(k, n), decode_ms(v), agg.result(agg.decode(v[8:])), None, False)
            for k, v in found_sessions
        ]


def _check_positive(name: str, value: int) -> None:
    if value <= 0:
        msg = f"{name} must be > 0, got {value}"
        raise ValueError(msg)

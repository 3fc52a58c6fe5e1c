"""Event-time windows in a store: tumbling, hopping and session windows, emitted once final.

Store layout (all in one ``KeyValueStore[bytes, bytes]``, under ``namespace``):

* ``ns + 0x00 'ww' + escape(key) + start`` -> ``end + encoded aggregate``: the open windows,
  sorted by (key, start);
* ``ns + 0x00 'we' + end + escape(key) + start`` -> ``b""``: a time-first index of window
  ends, so :meth:`WindowedAggregation.close_due` reads only the windows that are due.

Nothing is kept in Python memory: after a restore, a new :class:`WindowedAggregation` over
the same store continues exactly where the checkpointed state left off.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal

from samzapy.metrics import MetricsGroup
from samzapy.operators.aggregators import Aggregator
from samzapy.operators.ids import window_id
from samzapy.operators.keys import (
    MIN_MS,
    decode_ms,
    encode_ms,
    escape,
    unescape,
    until_inclusive,
)
from samzapy.operators.watermark import Watermark
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
    """Windows of ``size_ms`` starting every ``advance_ms``; an event is in every window that
    covers it, returned by ascending start.

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
    """Sessions of activity: an event at ``t`` covers ``[t, t + gap)`` and overlapping
    sessions of a key merge, so a session is ``[first event, last event + gap)`` and two
    events are in the same session when less than ``gap_ms`` separates them (directly or
    through events between them)."""

    gap_ms: int

    def __post_init__(self) -> None:
        _check_positive("gap_ms", self.gap_ms)


Assigner = TumblingWindows | HoppingWindows | SessionWindows


@dataclass(frozen=True, slots=True)
class WindowResult:
    """An emitted window.

    Attributes:
        key: the window's key.
        start: inclusive start in ms.
        end: exclusive end in ms.
        value: the aggregator's result.
        id: for final results, :func:`samzapy.operators.ids.window_id` of (key, start, end),
            the same on every re-emission; ``None`` for updates (the collector then derives
            the id from the input offset, which is deterministic too).
        final: False for ``emit="update"`` emissions.
    """

    key: bytes
    start: int
    end: int
    value: Any
    id: str | None
    final: bool = True


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
          deletes it (data and index) in the same call. On a crash before the next checkpoint
          the store is restored to the checkpointed state and the window is emitted again with
          the same id and bytes (outputs are flushed before a checkpoint is written): a window
          may be emitted more than once across crashes, but never lost.
        * Same inputs in the same order (and the same watermark moves) give the same results.

    Session windows: an event whose ``[t, t + gap)`` overlaps open sessions of its key merges
    them into one session (aggregates merged in start order, then the value added); the
    merged session replaces them in the store and index.
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
        self._wprefix = namespace + b"\x00ww"
        self._iprefix = namespace + b"\x00we"
        self._late = metrics.counter("late-messages") if metrics is not None else None
        self._late_windows = metrics.counter("late-window-drops") if metrics is not None else None

    def closed_before(self) -> int:
        """Windows with ``end <=`` this value are closed."""
        return self._watermark.current - self._grace

    def add(self, key: bytes, event_time_ms: int, value: Any) -> Added:
        """Add ``value`` at ``event_time_ms`` to the open windows of ``key``."""
        if isinstance(self._assigner, SessionWindows):
            return self._add_session(key, event_time_ms, value, self._assigner.gap_ms)
        bound = self.closed_before()
        escaped = escape(key)
        updates: list[WindowResult] = []
        accepted = dropped = 0
        for start, end in self._assigner.assign(event_time_ms):
            if end <= bound:
                dropped += 1
                continue
            accepted += 1
            acc = self._update(escaped + encode_ms(start), end, value)
            if self._updates:
                updates.append(WindowResult(key, start, end, self._agg.result(acc), None, final=False))
        if accepted and not dropped and not updates:
            return _ACCEPTED  # the common case: no allocation per event
        return self._added(updates, late=accepted == 0, dropped=dropped)

    def _update(self, suffix: bytes, end: int, value: Any) -> Any:
        store, agg = self._store, self._agg
        wkey = self._wprefix + suffix
        old = store.get(wkey)
        if old is None:
            acc = agg.create(value)
            store.put(self._iprefix + encode_ms(end) + suffix, b"")
        else:
            acc = agg.add(agg.decode(old[8:]), value)
        store.put(wkey, encode_ms(end) + agg.encode(acc))
        return acc

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
        acc = self._agg.create(value) if acc is None else self._agg.add(acc, value)
        suffix = escaped + encode_ms(start)
        index = {self._iprefix + encode_ms(end) + suffix: b""}
        puts = {self._wprefix + suffix: encode_ms(end) + self._agg.encode(acc), **index}
        writes = [(k, v) for k, v in writes if k not in puts] + list(puts.items())
        self._store.put_all(writes)
        updates = []
        if self._updates:
            updates.append(WindowResult(key, start, end, self._agg.result(acc), None, final=False))
        return self._added(updates, late=False)

    def close_due(self, limit: int | None = None) -> list[WindowResult]:
        """Emit and purge every closed window (see the class docstring).

        With ``limit``, only the first ``limit`` closed windows (in the same order) are emitted
        and purged; call again until it returns ``[]``. This bounds the memory a call holds
        when very many windows close at once (e.g. at end-of-stream), whatever the state size.
        """
        while True:
            results, scanned = self._close_batch(limit)
            # A full batch of stale index entries only: look further, or windows would wait.
            if results or limit is None or scanned < limit:
                return results

    def _close_batch(self, limit: int | None) -> tuple[list[WindowResult], int]:
        """Emit and purge the first ``limit`` due index entries; (results, entries scanned)."""
        prefix = self._iprefix
        with self._store.range(
            prefix + encode_ms(MIN_MS), until_inclusive(prefix, self.closed_before())
        ) as it:
            due = [entry.key for entry in islice(it, limit)]
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
                continue  # a stale index entry: its window is gone or has another end
            key, offset = unescape(suffix)
            start, end = decode_ms(suffix, offset), decode_ms(stored)
            value = self._agg.result(self._agg.decode(stored[8:]))
            results.append(WindowResult(key, start, end, value, window_id(key, start, end)))
            deletes.append(wkey)
        self._store.delete_all(deletes)
        return results, len(due)

    def open_windows(self, key: bytes) -> list[WindowResult]:
        """The windows of ``key`` still in the store, by start (current values, ``final=False``;
        may include closed windows not yet purged by :meth:`close_due`)."""
        prefix = self._wprefix + escape(key)
        with self._store.range(prefix + encode_ms(MIN_MS), prefix + b"\xff" * 9) as entries:
            found = [(e.key, e.value) for e in entries]
        n = len(prefix)
        return [
            WindowResult(
                key, decode_ms(k, n), decode_ms(v), self._agg.result(self._agg.decode(v[8:])), None, False
            )
            for k, v in found
        ]


def _check_positive(name: str, value: int) -> None:
    if value <= 0:
        msg = f"{name} must be > 0, got {value}"
        raise ValueError(msg)

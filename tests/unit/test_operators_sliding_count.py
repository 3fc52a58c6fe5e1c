"""Sliding and count windows and the emission modes, against independent computations, over a
real sorted in-memory store."""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.metrics import MetricsGroup  # noqa: E402
from samzapy.operators.aggregators import count, sum_of  # noqa: E402
from samzapy.operators.count_windows import CountAggregation, CountWindows, count_window_id  # noqa: E402
from samzapy.operators.sliding import SlidingAggregation, SlidingWindows  # noqa: E402
from samzapy.operators.watermark import Watermark  # noqa: E402
from samzapy.operators.windows import TumblingWindows, WindowedAggregation  # noqa: E402
from samzapy.output_ids import window_id  # noqa: E402


# ------------------------------------------------------------------ independent computations
def offline_sliding(events: list[tuple[bytes, int]], d: int) -> dict[tuple[bytes, int, int], int]:
    """Every sliding window (key, start, exclusive end) -> count, from the definition: the
    left window [t-d, t] of every record, and the right window [t+1, t+d+1] of every record
    with another record of its key in (t, t+d+1]."""
    times: dict[bytes, list[int]] = defaultdict(list)
    for key, t in events:
        times[key].append(t)
    out = {}
    for key, ts in times.items():
        starts = {t - d for t in ts} | {t + 1 for t in ts if any(t < u <= t + d + 1 for u in ts)}
        for s in starts:
            out[(key, s, s + d + 1)] = sum(1 for u in ts if s <= u <= s + d)
    return out


def offline_count(events: list[tuple[bytes, int]], size: int, step: int) -> dict[str, tuple[int, int, int]]:
    """Complete count windows: id -> (start, end, count) from each key's records in order."""
    times: dict[bytes, list[int]] = defaultdict(list)
    for key, t in events:
        times[key].append(t)
    out = {}
    for key, ts in times.items():
        for first in range(0, len(ts) - size + 1, step):
            chunk = ts[first : first + size]
            out[count_window_id(key, first)] = (min(chunk), max(chunk) + 1, size)
    return out


def sliding(d: int = 5000, grace: int = 0, emit: str = "final", lateness: int = 0, early: int = 0):  # type: ignore[no-untyped-def]
    store = SortedDictStore()
    wm = Watermark(store, lateness)
    op = SlidingAggregation(
        store,
        SlidingWindows(d),
        count(),
        wm,
        allowed_lateness_ms=grace,
        emit=emit,  # type: ignore[arg-type]
        early_fire_ms=early,
        watermark_lateness_ms=lateness,
        metrics=MetricsGroup("t"),
    )
    return store, wm, op


# ------------------------------------------------------------------ sliding
def test_sliding_windows_of_the_kafka_streams_example() -> None:
    _, wm, op = sliding(5000)
    for t in (8000, 9200, 12400):
        wm.observe(t)
        op.add(b"A", t, t)
    wm.advance_to(10**9)
    got = [(r.start, r.end - 1, r.value) for r in op.close_due()]
    want = [(3000, 8000, 1), (4200, 9200, 2), (7400, 12400, 3), (8001, 13001, 2), (9201, 14201, 1)]
    assert sorted(got) == want


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sliding_windows_equal_the_definition_whatever_the_order_of_on_time_records(seed: int) -> None:
    rng = random.Random(seed)
    d = 100
    events = [(rng.choice([b"a", b"b", b"c"]), rng.randrange(0, 3000)) for _ in range(400)]
    events.sort(key=lambda e: e[1] + rng.randrange(0, 200))  # disorder below the lateness
    store, wm, op = sliding(d, lateness=300)
    results = []
    for i, (key, t) in enumerate(events):
        wm.observe(t)
        assert not op.add(key, t, t).late
        if i % 37 == 0:
            results += op.close_due(limit=5)
    wm.advance_to(10**9)
    while batch := op.close_due(limit=7):
        results += batch
    got = {(r.key, r.start, r.end): r.value for r in results}
    assert len(got) == len(results)  # each window once
    assert got == offline_sliding(events, d)
    assert all(r.id == window_id(r.key, r.start, r.end) and r.final for r in results)
    assert [k for k, _ in store.all()] == [b"\x00wm"]  # windows, buckets and indexes purged


def test_sliding_record_behind_every_open_window_is_late_and_closed_windows_are_not_changed() -> None:
    _, wm, op = sliding(10)
    for t in (0, 5, 40):
        wm.observe(t)
        op.add(b"k", t, t)
    # watermark 40: windows ending (exclusive) at or before 40 are closed
    assert op.add(b"k", 29, 29).late is True  # 29 + 10 + 1 <= 40
    assert op.add(b"k", 30, 30).late is False  # its right-most window [30, 40] is open
    closed = {(r.start, r.end): r.value for r in op.close_due()}
    assert closed == {(-10, 1): 1, (-5, 6): 2, (1, 12): 1}
    wm.advance_to(1000)
    rest = {(r.start, r.end): r.value for r in op.close_due()}
    # 30 joins the left window of 40 and creates its right window [31, 41]; its own left
    # window [20, 30] had closed already and is not created
    assert rest == {(30, 41): 2, (31, 42): 1}


def test_sliding_update_mode_emits_every_changed_window_and_flags_late_revisions() -> None:
    _, wm, op = sliding(10, emit="update", lateness=20)
    wm.observe(100)  # watermark 80, event-time progress 100
    first = op.add(b"k", 100, 1).updates
    assert [(u.start, u.end, u.value, u.final, u.late) for u in first] == [(90, 101, 1, False, False)]
    second = op.add(b"k", 85, 1).updates  # window [75, 86) ended before progress 100: late revision
    assert [(u.start, u.end, u.value, u.late) for u in second] == [(75, 86, 1, True)]
    third = op.add(b"k", 92, 1).updates
    got = sorted((u.start, u.end, u.value, u.late) for u in third)
    assert got == [(82, 93, 2, True), (86, 97, 1, True), (90, 101, 2, False), (93, 104, 1, False)]
    assert all(u.id is None and not u.final for u in second + third)


# ------------------------------------------------------------------ count
@pytest.mark.parametrize(("size", "step"), [(3, 3), (4, 2), (5, 1), (3, 2)])
def test_count_windows_equal_the_definition(size: int, step: int) -> None:
    rng = random.Random(size * 10 + step)
    events = [(rng.choice([b"x", b"y"]), rng.randrange(0, 10_000)) for _ in range(101)]
    op = CountAggregation(SortedDictStore(), CountWindows(size, step), count())
    results = [r for key, t in events for r in op.add(key, t, t).updates]
    got = {r.id: (r.start, r.end, r.value) for r in results}
    assert len(got) == len(results) and all(r.final for r in results)
    assert got == offline_count(events, size, step)


def test_count_window_open_windows_survive_a_restart_and_update_mode_reports_progress() -> None:
    store = SortedDictStore()
    op = CountAggregation(store, CountWindows(3), sum_of(), emit="update")
    assert [(u.value, u.final) for u in op.add(b"k", 10, 1).updates] == [(1, False)]
    again = CountAggregation(store, CountWindows(3), sum_of(), emit="update")
    assert [(u.value, u.final) for u in again.add(b"k", 5, 2).updates] == [(3, False)]
    done = again.add(b"k", 20, 4).updates
    assert [(u.start, u.end, u.value, u.final, u.id) for u in done] == [(5, 21, 7, True, "cw:6b:0")]
    assert again.open_windows(b"k") == []


def test_count_window_step_above_size_is_refused() -> None:
    with pytest.raises(ValueError, match="step"):
        CountWindows(2, 3)


# ------------------------------------------------------------------ early firing
def test_early_firing_emits_changed_windows_once_per_interval_with_stable_ids() -> None:
    store = SortedDictStore()
    wm = Watermark(store)
    op = WindowedAggregation(store, TumblingWindows(100), count(), wm, early_fire_ms=1000)
    op.add(b"k", 10, 1)
    assert op.fire_early(0) == []  # starts the clock
    op.add(b"k", 20, 1)
    assert op.fire_early(999) == []
    fired = op.fire_early(1000)
    assert [(r.start, r.end, r.value, r.final) for r in fired] == [(0, 100, 2, False)]
    assert fired[0].id.startswith(window_id(b"k", 0, 100) + ":e:")
    assert op.fire_early(5000) == []  # nothing changed since
    op.add(b"k", 30, 1)
    wm.advance_to(100)
    assert [(r.value, r.final) for r in op.close_due()] == [(3, True)]
    assert [k for k, _ in store.all()] == [b"\x00wm"]  # the marker went with its window
    assert op.fire_early(9000) == []


def test_early_ids_carry_the_same_bytes_in_a_run_that_fires_at_other_times() -> None:
    def run(fire_every: int) -> dict[str, object]:
        _, wm, op = sliding(50, early=1)
        seen: dict[str, object] = {}
        for i in range(60):
            t = i * 7
            wm.observe(t)
            op.add(b"k", t, t)
            if i % fire_every == 0:
                seen.update({r.id: r.value for r in op.fire_early(i * 10)})
        return seen

    a, b = run(3), run(5)
    common = set(a) & set(b)
    assert common and all(a[i] == b[i] for i in common)


def test_sliding_and_count_early_firing() -> None:
    store, wm, op = sliding(10, early=5)
    wm.observe(3)
    op.add(b"k", 3, 3)
    op.fire_early(0)
    assert [(r.start, r.end, r.value) for r in op.fire_early(5)] == [(-7, 4, 1)]
    op.add(b"k", 4, 4)
    wm.advance_to(100)
    assert len(op.close_due()) == 3
    assert [k for k, _ in store.all()] == [b"\x00wm"]
    cstore = SortedDictStore()
    cop = CountAggregation(cstore, CountWindows(3), count(), early_fire_ms=5)
    cop.add(b"k", 3, 3)
    cop.fire_early(0)
    fired = cop.fire_early(5)
    assert [(r.start, r.end, r.value, r.final, r.window) for r in fired] == [(3, 4, 1, False, "cw:6b:0")]
    assert fired[0].id.startswith("cw:6b:0:e:")
    cop.add(b"k", 1, 1)
    assert [(r.start, r.end, r.final) for r in cop.add(b"k", 2, 2).updates] == [(1, 4, True)]
    assert [k for k, _ in cstore.all()] == [b"\x00cnk\x00\x01"]  # only the key's record count

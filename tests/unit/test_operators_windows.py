"""Windowed aggregation over a real sorted in-memory store: counts, emission once, lateness,
session merges and splits, restarts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.metrics import MetricsGroup  # noqa: E402
from samzapy.operators.aggregators import count, max_of, min_of, reduce, sum_of  # noqa: E402
from samzapy.operators.key_encoding import encode_ms  # noqa: E402
from samzapy.operators.watermark import Watermark  # noqa: E402
from samzapy.operators.windows import (  # noqa: E402
    HoppingWindows,
    SessionWindows,
    TumblingWindows,
    WindowedAggregation,
    WindowResult,
)

HOUR = 3_600_000


def make(assigner, aggregator=None, lateness=0, grace=0, emit="final", store=None):  # type: ignore[no-untyped-def]
    store = store if store is not None else SortedDictStore()
    wm = Watermark(store, lateness)
    metrics = MetricsGroup("task")
    agg = WindowedAggregation(
        store, assigner, aggregator or count(), wm, allowed_lateness_ms=grace, emit=emit, metrics=metrics
    )
    return store, wm, agg, metrics


def feed(wm: Watermark, agg: WindowedAggregation, events: list[tuple[bytes, int]]) -> list[bool]:
    late = []
    for key, t in events:
        wm.observe(t)
        late.append(agg.add(key, t, {"t": t}).late)
    return late


def final(results: list[WindowResult]) -> list[tuple[bytes, int, int, object]]:
    return [(r.key, r.start, r.end, r.value) for r in results]


def test_hopping_assigns_every_covering_window() -> None:
    assert HoppingWindows(10, 5).assign(10) == [(5, 15), (10, 20)]
    assert HoppingWindows(10, 3).assign(9) == [(0, 10), (3, 13), (6, 16), (9, 19)]
    assert HoppingWindows(10, 10).assign(-1) == [(-10, 0)]
    assert TumblingWindows(10, offset_ms=3).assign(2) == [(-7, 3)]
    with pytest.raises(ValueError, match="advance_ms"):
        HoppingWindows(5, 10)


def test_tumbling_counts_are_emitted_once_when_the_watermark_passes_the_end() -> None:
    store, wm, agg, _ = make(TumblingWindows(HOUR), lateness=10 * 60_000)
    feed(wm, agg, [(b"u1", 10), (b"u2", 20), (b"u1", HOUR - 1), (b"u1", HOUR + 5)])
    assert agg.close_due() == []
    feed(wm, agg, [(b"u2", HOUR + 10 * 60_000)])
    results = agg.close_due()
    assert final(results) == [(b"u1", 0, HOUR, 2), (b"u2", 0, HOUR, 1)]
    assert [r.id for r in results] == [f"w:7531:0:{HOUR}", f"w:7532:0:{HOUR}"]
    assert all(r.final for r in results)
    assert agg.close_due() == []
    wm.advance_to(3 * HOUR)
    assert final(agg.close_due()) == [(b"u1", HOUR, 2 * HOUR, 1), (b"u2", HOUR, 2 * HOUR, 1)]
    assert list(store.all()) == [(b"\x00wm", encode_ms(3 * HOUR))]


def test_out_of_order_events_within_lateness_count_and_late_ones_are_flagged() -> None:
    _, wm, agg, metrics = make(TumblingWindows(100), lateness=50)
    late = feed(wm, agg, [(b"k", 10), (b"k", 120), (b"k", 60), (b"k", 160), (b"k", 99), (b"k", 170)])
    # watermark after 160 is 110: window [0,100) closed, so the event at 99 is late
    assert late == [False, False, False, False, True, False]
    assert metrics.snapshot()["late-messages"] == 1
    assert final(agg.close_due()) == [(b"k", 0, 100, 2)]


def test_results_do_not_depend_on_when_close_due_runs() -> None:
    events = [(b"k", 10), (b"k", 150), (b"k", 90), (b"j", 260), (b"k", 95), (b"k", 310)]
    _, wm1, eager, _ = make(TumblingWindows(100), lateness=20)
    _, wm2, lazy, _ = make(TumblingWindows(100), lateness=20)
    out1: list[WindowResult] = []
    for key, t in events:
        wm1.observe(t)
        eager.add(key, t, None)
        out1 += eager.close_due()
    for key, t in events:
        wm2.observe(t)
        lazy.add(key, t, None)
    assert out1 == lazy.close_due()


def test_grace_keeps_windows_open_after_the_watermark() -> None:
    _, wm, agg, _ = make(TumblingWindows(100), grace=30)
    assert feed(wm, agg, [(b"k", 10), (b"k", 125), (b"k", 20)]) == [False, False, False]
    assert agg.close_due() == []
    assert feed(wm, agg, [(b"k", 130), (b"k", 30)]) == [False, True]
    assert final(agg.close_due()) == [(b"k", 0, 100, 2)]


def test_hopping_windows_drop_only_closed_windows_of_an_event() -> None:
    _, wm, agg, metrics = make(HoppingWindows(10, 5))
    assert feed(wm, agg, [(b"k", 3), (b"k", 11), (b"k", 8)]) == [False, False, False]
    # the event at 8 is in [0,10) (closed at watermark 11) and [5,15) (open)
    assert metrics.snapshot()["late-window-drops"] == 1
    assert final(agg.close_due()) == [(b"k", -5, 5, 1), (b"k", 0, 10, 1)]
    wm.advance_to(20)
    assert final(agg.close_due()) == [(b"k", 5, 15, 2), (b"k", 10, 20, 1)]


@pytest.mark.parametrize(
    ("aggregator", "expected"),
    [(sum_of(lambda v: v["t"]), 30), (min_of(lambda v: v["t"]), 5), (max_of(lambda v: v["t"]), 25)],
)
def test_sum_min_max(aggregator, expected) -> None:  # type: ignore[no-untyped-def]
    _, wm, agg, _ = make(TumblingWindows(100), aggregator)
    feed(wm, agg, [(b"k", 25), (b"k", 5)])
    wm.advance_to(100)
    assert agg.close_due()[0].value == expected


def test_reduce_with_a_user_function_and_update_emissions() -> None:
    _, wm, agg, _ = make(TumblingWindows(100), reduce(lambda a, b: a + b, lambda v: [v["t"]]), emit="update")
    wm.observe(5)
    first = agg.add(b"k", 5, {"t": 5})
    second = agg.add(b"k", 7, {"t": 7})
    assert [(u.value, u.id, u.final) for u in first.updates + second.updates] == [
        ([5], None, False),
        ([5, 7], None, False),
    ]


def test_windows_survive_a_restart_over_the_same_store() -> None:
    store, wm, agg, _ = make(TumblingWindows(100), lateness=10)
    feed(wm, agg, [(b"k", 10), (b"k", 20)])
    _, wm2, agg2, _ = make(TumblingWindows(100), lateness=10, store=store)
    assert wm2.current == 10
    feed(wm2, agg2, [(b"k", 30), (b"k", 200)])
    assert final(agg2.close_due()) == [(b"k", 0, 100, 3)]


def test_re_emission_after_a_crash_has_the_same_id_and_value() -> None:
    store, wm, agg, _ = make(TumblingWindows(100))
    feed(wm, agg, [(b"k", 10), (b"k", 150)])
    checkpointed = dict(store.data)
    first = agg.close_due()
    restored = SortedDictStore()
    restored.put_all(checkpointed.items())
    _, _, agg2, _ = make(TumblingWindows(100), store=restored)
    assert agg2.close_due() == first


def session(events: list[int], gap: int = 10, lateness: int = 1000) -> list[tuple[int, int, object]]:
    _, wm, agg, _ = make(
        SessionWindows(gap), reduce(lambda a, b: sorted(a + b), lambda v: [v["t"]]), lateness
    )
    feed(wm, agg, [(b"k", t) for t in events])
    return [(w.start, w.end, w.value) for w in agg.open_windows(b"k")]


def test_sessions_split_by_the_gap() -> None:
    assert session([0, 5, 30, 39]) == [(0, 15, [0, 5]), (30, 49, [30, 39])]
    assert session([0, 10]) == [(0, 10, [0]), (10, 20, [10])]


def test_out_of_order_event_creates_a_session_between_two() -> None:
    assert session([0, 100, 50]) == [(0, 10, [0]), (50, 60, [50]), (100, 110, [100])]


def test_out_of_order_event_extends_a_session_backwards_and_forwards() -> None:
    assert session([50, 45]) == [(45, 60, [45, 50])]
    assert session([50, 41, 59]) == [(41, 69, [41, 50, 59])]


def test_event_bridging_two_sessions_merges_them_and_their_aggregates() -> None:
    assert session([0, 18, 9]) == [(0, 28, [0, 9, 18])]
    assert session([0, 5, 30, 21, 12]) == [(0, 40, [0, 5, 12, 21, 30])]


def test_merged_session_is_emitted_once_with_its_merged_bounds() -> None:
    store, wm, agg, _ = make(SessionWindows(10), lateness=100)
    feed(wm, agg, [(b"k", 0), (b"k", 18), (b"j", 3), (b"k", 9)])
    wm.advance_to(1000)
    results = agg.close_due()
    assert final(results) == [(b"j", 3, 13, 1), (b"k", 0, 28, 3)]
    assert results[1].id == "w:6b:0:28"
    assert agg.close_due() == []
    assert list(store.all()) == [(b"\x00wm", encode_ms(1000))]


def test_late_session_event_is_flagged_unless_it_falls_into_an_open_session() -> None:
    _, wm, agg, metrics = make(SessionWindows(10), count(), lateness=0, grace=0)
    assert feed(wm, agg, [(b"k", 0), (b"k", 8), (b"k", 50), (b"k", 3)]) == [False, False, False, True]
    assert metrics.snapshot()["late-messages"] == 1
    _, wm, agg, _ = make(SessionWindows(100), count())
    # the session [0, 150) is still open at watermark 50, so an event at 1 joins it
    assert feed(wm, agg, [(b"k", 0), (b"k", 50), (b"k", 1)]) == [False, False, False]
    assert [w.value for w in agg.open_windows(b"k")] == [3]


def test_same_results_through_a_small_object_cache() -> None:
    from samzapy.stores.cached import CachedStore

    rng = __import__("random").Random(5)
    events = [(bytes([97 + rng.randrange(5)]), rng.randrange(0, 5_000)) for _ in range(2_000)]
    outputs = []
    for store in (SortedDictStore(), CachedStore(SortedDictStore(), cache_size=7, write_batch_size=3)):
        for assigner in (TumblingWindows(100), HoppingWindows(100, 30), SessionWindows(15)):
            wm = Watermark(store, 300, namespace=repr(assigner).encode())
            agg = WindowedAggregation(store, assigner, count(), wm, namespace=repr(assigner).encode())
            out: list[object] = []
            for i, (key, t) in enumerate(events):
                wm.observe(t)
                out.append(agg.add(key, t, None).late)
                if i % 50 == 0:
                    out += agg.close_due()
            wm.advance_to(10_000)
            out += agg.close_due()
            outputs.append(out)
    assert outputs[:3] == outputs[3:]
    assert sum(r.value for r in outputs[0] if isinstance(r, WindowResult)) + outputs[0].count(True) == 2_000

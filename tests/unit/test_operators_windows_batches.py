"""``WindowedAggregation.close_due(limit=...)``: closed windows emitted in bounded batches, in
the same order and with the same results as one unbounded call."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.operators.aggregators import count  # noqa: E402
from samzapy.operators.key_encoding import encode_ms, escape  # noqa: E402
from samzapy.operators.watermark import Watermark  # noqa: E402
from samzapy.operators.windows import (  # noqa: E402
    SessionWindows,
    TumblingWindows,
    WindowedAggregation,
    WindowResult,
)


def filled(keys: int) -> tuple[SortedDictStore, WindowedAggregation]:
    """``keys`` keys with two views each in window [0, 100) and one in [100, 200)."""
    store = SortedDictStore()
    wm = Watermark(store, 0)
    agg = WindowedAggregation(store, TumblingWindows(100), count(), wm)
    for t in (5, 50, 150):
        wm.observe(t)
        for k in range(keys):
            assert not agg.add(b"k%03d" % k, t, {"t": t}).late
    wm.advance_to(200)
    return store, agg


def drain(agg: WindowedAggregation, limit: int) -> list[list[WindowResult]]:
    batches = []
    while batch := agg.close_due(limit=limit):
        batches.append(batch)
    return batches


def test_batches_hold_at_most_limit_and_add_up_to_one_unbounded_call() -> None:
    _, everything = filled(25)
    expected = everything.close_due()
    store, agg = filled(25)

    batches = drain(agg, 7)

    assert [len(b) for b in batches] == [7, 7, 7, 7, 7, 7, 7, 1]
    assert [r for b in batches for r in b] == expected
    assert [(r.start, r.value) for r in expected[:25]] == [(0, 2)] * 25
    assert agg.close_due() == []
    assert list(store.all()) == list(filled(0)[0].all())  # only the watermark is left


def test_a_full_batch_of_stale_session_index_entries_does_not_hide_the_sessions_behind_it() -> None:
    store = SortedDictStore()
    wm = Watermark(store, 0)
    agg = WindowedAggregation(store, SessionWindows(10), count(), wm)
    for key in (b"k0", b"k1", b"k2"):
        agg.add(key, 90, None)
    # Stale index entries (their sessions are gone) sort before the live ones of the same end.
    for n in range(5):
        store.put(b"\x00we" + encode_ms(100) + escape(b"a%02d" % n) + encode_ms(90), b"")
    wm.advance_to(200)

    batches = drain(agg, 4)

    assert [(r.key, r.start, r.value) for b in batches for r in b] == [
        (b"k0", 90, 1),
        (b"k1", 90, 1),
        (b"k2", 90, 1),
    ]
    assert list(store.all()) == [(b"\x00wm", encode_ms(200))]

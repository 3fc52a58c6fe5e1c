"""The window store's layout (``samzapy.operators.window_layout``): one time-first entry per
fixed window, the store operations it costs, and the move of windows stored by older samzapy."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.operators.aggregators import count, json_encode  # noqa: E402
from samzapy.operators.key_encoding import encode_ms, escape  # noqa: E402
from samzapy.operators.watermark import Watermark  # noqa: E402
from samzapy.operators.window_layout import fixed_key, migrate_fixed  # noqa: E402
from samzapy.operators.windows import (  # noqa: E402
    HoppingWindows,
    TumblingWindows,
    WindowedAggregation,
    WindowResult,
)


class CountingStore(SortedDictStore):
    """Counts every store operation: single ``get``/``put`` calls, the entries of batches
    (apart), and range scans."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_puts = 0
        self.batch_deletes = 0
        self.ranges = 0
        self.range_starts: list[bytes] = []

    def put_all(self, entries):  # type: ignore[no-untyped-def]
        entries = list(entries)
        self.batch_puts += sum(v is not None for _, v in entries)
        self.batch_deletes += sum(v is None for _, v in entries)
        puts = self.puts
        super().put_all(entries)  # goes through put(): not single puts
        self.puts = puts

    def range(self, from_key, to_key):  # type: ignore[no-untyped-def]
        self.ranges += 1
        self.range_starts.append(from_key)
        return super().range(from_key, to_key)


def test_a_tumbling_window_is_one_time_first_entry_holding_only_the_aggregate() -> None:
    store = SortedDictStore()
    wm = Watermark(store)
    agg = WindowedAggregation(store, TumblingWindows(100), count(), wm, namespace=b"cw")
    wm.advance_to(150)
    agg.add(b"alice", 250, None)
    agg.add(b"alice", 299, None)

    key = b"cw\x00wt" + encode_ms(300) + escape(b"alice") + encode_ms(200)
    assert fixed_key(b"cw\x00wt", 300, b"alice", 200) == key
    assert store.data == {b"\x00wm": encode_ms(150), key: json_encode(2)}


def test_an_event_costs_one_get_and_one_put_and_a_closed_window_one_scan_entry_and_one_delete() -> None:
    store = CountingStore()
    wm = Watermark(store)
    agg = WindowedAggregation(store, TumblingWindows(100), count(), wm)
    store.gets = store.puts = store.ranges = 0  # building the operator looked for old windows once

    for t in range(0, 200, 10):
        for key in (b"a", b"b", b"c"):
            agg.add(key, t, None)
    assert (store.gets, store.puts) == (60, 60)

    wm.advance_to(200)
    store.gets = store.puts = 0
    results = agg.close_due()
    assert [(r.key, r.start, r.value) for r in results] == [
        (b"a", 0, 10),
        (b"b", 0, 10),
        (b"c", 0, 10),
        (b"a", 100, 10),
        (b"b", 100, 10),
        (b"c", 100, 10),
    ]
    assert (store.gets, store.puts, store.ranges) == (0, 0, 1)
    assert (store.batch_puts, store.batch_deletes) == (0, 6)


def legacy_store(windows: list[tuple[bytes, int, int, int]], stale: int = 0) -> SortedDictStore:
    """A store as samzapy before round 3 wrote fixed windows: a key-first entry (end + value)
    and an index entry per window, plus ``stale`` index entries whose windows are gone."""
    store = SortedDictStore()
    for key, start, end, n in windows:
        suffix = escape(key) + encode_ms(start)
        store.put(b"cw\x00ww" + suffix, encode_ms(end) + json_encode(n))
        store.put(b"cw\x00we" + encode_ms(end) + suffix, b"")
    for i in range(stale):
        store.put(b"cw\x00we" + encode_ms(0) + escape(b"gone%d" % i) + encode_ms(-100), b"")
    return store


def test_windows_stored_by_older_samzapy_are_moved_once_and_emitted_as_before() -> None:
    old = [(b"u1", 0, 100, 3), (b"u2", 0, 100, 1), (b"u1", 100, 200, 2)]
    store = legacy_store(old, stale=3)
    wm = Watermark(store, namespace=b"cw")

    agg = WindowedAggregation(store, TumblingWindows(100), count(), wm, namespace=b"cw")

    assert sorted(store.data) == sorted(fixed_key(b"cw\x00wt", e, k, s) for k, s, e, _ in old)
    assert migrate_fixed(store, b"cw") == 0  # nothing left to move
    wm.advance_to(150)
    agg.add(b"u1", 160, None)
    wm.advance_to(200)
    assert [(r.key, r.start, r.end, r.value) for r in agg.close_due()] == [
        (b"u1", 0, 100, 3),
        (b"u2", 0, 100, 1),
        (b"u1", 100, 200, 3),
    ]


def test_a_move_in_many_batches_keeps_every_window(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("samzapy.operators.window_layout.MIGRATE_BATCH", 3)
    old = [(b"k%02d" % i, 0, 100, i + 1) for i in range(10)]
    store = legacy_store(old, stale=4)

    assert migrate_fixed(store, b"cw") == 10

    expected = {fixed_key(b"cw\x00wt", e, k, s): json_encode(n) for k, s, e, n in old}
    assert store.data == dict(sorted(expected.items()))


def test_hopping_windows_give_the_same_results_as_counting_directly() -> None:
    rng = random.Random(3)
    events = sorted((rng.randrange(1_000), bytes([97 + rng.randrange(4)])) for _ in range(500))
    store = SortedDictStore()
    wm = Watermark(store)
    agg = WindowedAggregation(store, HoppingWindows(100, 25), count(), wm)
    results: list[WindowResult] = []
    for t, key in events:
        wm.advance_to(t)
        assert not agg.add(key, t, None).late
        results += agg.close_due(limit=7)
    wm.advance_to(10_000)
    while batch := agg.close_due(limit=7):
        results += batch

    expected: dict[tuple[bytes, int], int] = {}
    for t, key in events:
        for start, _ in HoppingWindows(100, 25).assign(t):
            expected[key, start] = expected.get((key, start), 0) + 1
    assert {(r.key, r.start): r.value for r in results} == expected
    assert len(results) == len(expected)
    assert [(r.end, r.key, r.start) for r in results] == sorted((r.end, r.key, r.start) for r in results)
    assert list(store.all()) == [(b"\x00wm", encode_ms(10_000))]


def test_stored_aggregates_are_compact_bytes() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        values = [json_encode(n) for n in range(1_000)]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # orjson's own result would hold its 4 KiB write buffer each (4 MB here).
    assert values[7] == b"7" and held < 200_000


def test_scans_for_due_windows_start_where_the_last_one_ended() -> None:
    # Closed windows leave tombstones at the front of the time-first range: a scan from the
    # smallest end would step over all of them every time.
    store = CountingStore()
    wm = Watermark(store)
    agg = WindowedAggregation(store, TumblingWindows(100), count(), wm)
    for t in (10, 110, 210):
        agg.add(b"k%d" % t, t, None)
    prefix = b"\x00wt"

    wm.advance_to(100)
    assert [r.start for r in agg.close_due(limit=1)] == [0]
    assert agg.close_due(limit=1) == []
    wm.advance_to(250)
    assert [r.start for r in agg.close_due()] == [100]

    assert store.range_starts[-3:] == [
        prefix,
        fixed_key(prefix, 100, b"k10", 0) + b"\x00",
        prefix + encode_ms(101),
    ]
    again = WindowedAggregation(store, TumblingWindows(100), count(), wm)  # a restart
    wm.advance_to(400)
    assert [r.start for r in again.close_due()] == [200]
    assert store.range_starts[-1] == prefix

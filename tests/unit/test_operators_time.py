"""Key encodings, the watermark and timers, over a real sorted in-memory store."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.operators.key_encoding import (  # noqa: E402
    MIN_MS,
    decode_window_key,
    encode_ms,
    encode_time_key,
    encode_window_key,
    escape,
    key_prefix_end,
)
from samzapy.operators.timers import Timer, TimerService  # noqa: E402
from samzapy.operators.watermark import Watermark  # noqa: E402


def test_window_keys_sort_by_key_then_start_for_arbitrary_bytes() -> None:
    rng = random.Random(7)
    pairs = {
        (bytes(rng.choice([0, 1, 2, 255]) for _ in range(rng.randrange(4))), rng.randrange(-50, 50))
        for _ in range(400)
    }
    by_bytes = sorted(pairs, key=lambda p: encode_window_key(*p))
    assert by_bytes == sorted(pairs)
    assert all(decode_window_key(encode_window_key(k, s)) == (k, s) for k, s in pairs)


def test_range_of_one_key_excludes_keys_it_prefixes() -> None:
    store = SortedDictStore()
    for key in [b"a", b"a\x00", b"a\x00\x01", b"a\x80", b"ab"]:
        store.put(encode_window_key(key, 5), key)
    lo, hi = encode_window_key(b"a", MIN_MS), key_prefix_end(escape(b"a"))
    assert [e.value for e in store.range(lo, hi)] == [b"a"]


def test_time_keys_sort_by_time_then_key() -> None:
    items = [(3, b"b"), (-1, b"z"), (3, b"a"), (0, b"")]
    assert sorted(items, key=lambda p: encode_time_key(*p)) == sorted(items)
    assert encode_ms(-1) < encode_ms(0)


def test_watermark_is_max_event_time_minus_lateness_and_never_goes_back() -> None:
    wm = Watermark(SortedDictStore(), allowed_lateness_ms=10)
    assert wm.current == MIN_MS
    assert wm.observe(100)
    assert wm.current == 90
    assert not wm.observe(50)
    assert wm.current == 90
    assert wm.is_behind(89) and not wm.is_behind(90)
    assert wm.has_passed(90) and not wm.has_passed(91)


def test_watermark_survives_a_restart_over_the_same_store() -> None:
    store = SortedDictStore()
    wm = Watermark(store, allowed_lateness_ms=10)
    wm.observe(1000)
    restarted = Watermark(store, allowed_lateness_ms=500)
    assert restarted.current == 990
    restarted.observe(1200)
    assert restarted.current == 990
    restarted.advance_to(995)
    assert Watermark(store).current == 995


def test_watermark_writes_once_per_advance() -> None:
    store = SortedDictStore()
    wm = Watermark(store)
    for t in [5, 3, 5, 4, 6]:
        wm.observe(t)
    assert store.puts == 2


def test_watermarks_in_distinct_namespaces_share_a_store() -> None:
    store = SortedDictStore()
    Watermark(store, namespace=b"a").observe(5)
    Watermark(store, namespace=b"b").observe(7)
    assert Watermark(store, namespace=b"a").current == 5


def test_negative_lateness_is_rejected() -> None:
    with pytest.raises(ValueError, match="allowed_lateness_ms"):
        Watermark(SortedDictStore(), -1)


def test_event_timers_fire_once_in_time_order_when_the_watermark_passes() -> None:
    store = SortedDictStore()
    wm = Watermark(store)
    timers = TimerService(store, wm)
    timers.set_event_timer(20, b"b", b"x")
    timers.set_event_timer(10, b"a")
    timers.set_event_timer(20, b"a")
    timers.set_event_timer(30, b"c")
    wm.observe(20)
    assert list(timers.fire_due(0)) == [
        Timer("event", 10, b"a"),
        Timer("event", 20, b"a"),
        Timer("event", 20, b"b", b"x"),
    ]
    assert list(timers.fire_due(0)) == []
    wm.observe(40)
    assert [t.key for t in timers.fire_due(0)] == [b"c"]


def test_processing_timers_follow_the_wall_clock_and_survive_a_restart() -> None:
    store = SortedDictStore()
    timers = TimerService(store, Watermark(store))
    timers.set_processing_timer(1_000, b"k", b"p")
    timers.set_processing_timer(2_000, b"k")
    assert list(timers.fire_due(999)) == []
    restarted = TimerService(store, Watermark(store))
    assert list(restarted.fire_due(1_500)) == [Timer("processing", 1_000, b"k", b"p")]


def test_setting_a_timer_again_replaces_it_and_delete_cancels() -> None:
    store = SortedDictStore()
    wm = Watermark(store)
    timers = TimerService(store, wm)
    timers.set_event_timer(5, b"k", b"old")
    timers.set_event_timer(5, b"k", b"new")
    timers.set_event_timer(6, b"gone")
    timers.delete(6, b"gone")
    wm.observe(10)
    assert list(timers.fire_due(0)) == [Timer("event", 5, b"k", b"new")]
    assert store.data == {b"\x00wm": encode_ms(10)}

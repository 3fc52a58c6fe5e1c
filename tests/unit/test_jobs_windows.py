"""The window job's kinds (hopping, sliding, count) and emission modes (update, early), in
process with the TaskHarness, input keyed by user (direct mode)."""

from __future__ import annotations

from pathlib import Path

from samzapy.config import load_config
from samzapy.jobs.event_time import end_of_stream_record
from samzapy.jobs.pageview_counter import PageViewCounterTask
from samzapy.operators import window_id
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config"
EOS_HEADERS = end_of_stream_record()[0]
INPUT = "kafka.pageviews-by-user"


def counter(*overrides: str) -> TaskHarness:
    config = load_config(
        CONFIG / "pageview-counter.properties",
        ["watermark.upstream.tasks=0", "window.allowed.lateness.ms=0", *overrides],
    )
    return TaskHarness(PageViewCounterTask, config)


def feed(h: TaskHarness, views: list[tuple[str, int]], end: bool = True) -> None:
    for n, (user, ts) in enumerate(views):
        h.send(INPUT, user, {"view_id": f"v{n}", "user_id": user, "page": "/", "ts": ts})
    if end:
        h.send(INPUT, None, {"control": "end-of-stream"}, headers=EOS_HEADERS)


def records(h: TaskHarness) -> list[dict]:
    return [o.message for o in h.outputs if o.system_stream.stream == "pageview-counts"]


def test_sliding_windows_by_config():
    h = counter("window.type=sliding", "window.size.ms=100", "window.allowed.lateness.ms=1000")
    feed(h, [("u1", 0), ("u1", 50), ("u1", 120)])
    got = sorted((m["window_start"], m["window_end"], m["count"]) for m in records(h))
    # left windows of 0, 50, 120; right windows of 0 (holds 50) and 50 (holds 120)
    assert got == [(-100, 1, 1), (-50, 51, 2), (1, 102, 1), (20, 121, 2), (51, 152, 1)]
    ids = {window_id(b"u1", m["window_start"], m["window_end"]) for m in records(h)}
    assert {o.id for o in h.outputs} == ids


def test_hopping_windows_by_config():
    h = counter("window.type=hopping", "window.size.ms=100", "window.advance.ms=50")
    feed(h, [("u1", 10), ("u1", 60)])
    got = sorted((m["window_start"], m["count"]) for m in records(h))
    assert got == [(-50, 1), (0, 2), (50, 1)]


def test_count_windows_close_on_their_last_view_and_ignore_event_time():
    h = counter("window.type=count", "window.count.size=2", "window.count.step=1")
    feed(h, [("u1", 30), ("u2", 5), ("u1", 10), ("u1", 20)], end=False)
    got = [(o.id, o.message["window_start"], o.message["window_end"], o.message["count"]) for o in h.outputs]
    assert got == [("cw:7531:0", 10, 31, 2), ("cw:7531:1", 10, 21, 2)]


def test_update_emission_sends_every_change_then_the_final_count():
    h = counter("window.emit=update", "window.size.ms=100", "window.allowed.lateness.ms=50")
    feed(h, [("u1", 10), ("u1", 20), ("u1", 130), ("u1", 90), ("u1", 30)], end=False)
    updates = [m for m in records(h) if not m["final"]]
    wid = window_id(b"u1", 0, 100)
    assert [(m["window_id"], m["count"], m["late"]) for m in updates if m["window_start"] == 0] == [
        (wid, 1, False),
        (wid, 2, False),
        (wid, 3, True),  # 90 came after the progress (130) had passed the window's end
        (wid, 4, True),  # 30 too; the watermark (80) had not closed [0, 100): it still counts
    ]
    h.send(INPUT, None, {"control": "end-of-stream"}, headers=EOS_HEADERS)
    finals = {m["window_id"]: m["count"] for m in records(h) if m["final"]}
    assert finals == {wid: 4, window_id(b"u1", 100, 200): 1}
    assert all(o.id is not None for o in h.outputs)


def test_early_firing_sends_current_counts_before_the_final_one(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("samzapy.jobs.pageview_counter.time.time", lambda: clock[0])
    h = counter("window.early.fire.ms=500", "window.size.ms=100", "window.allowed.lateness.ms=1000")
    h.window()  # starts the early-firing clock
    feed(h, [("u1", 10), ("u1", 20)], end=False)
    clock[0] += 0.6
    h.window()
    early = [m for m in records(h) if not m["final"]]
    assert [(m["window_id"], m["count"]) for m in early] == [(window_id(b"u1", 0, 100), 2)]
    h.send(INPUT, None, {"control": "end-of-stream"}, headers=EOS_HEADERS)
    assert [(m["count"], m["final"]) for m in records(h)] == [(2, False), (2, True)]

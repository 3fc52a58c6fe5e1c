"""The window job's kinds (hopping, sliding, count) and emission modes (update, early), in
process with the TaskHarness, input keyed by user (direct mode)."""

from __future__ import annotations

from pathlib import Path

from samzapy.config import load_config
from samzapy.jobs.pageview_counter import PageViewCounterTask
from samzapy.jobs.pageview_repartition import PageViewRepartitionTask
from samzapy.operators import window_id
from samzapy.operators.event_time import (
    CONTROL_HEADER,
    IDLE,
    control_message,
    end_of_stream_record,
    lineage_header,
)
from samzapy.operators.key_encoding import MIN_MS
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config"
EOS_HEADERS = end_of_stream_record()[0]
INPUT = "kafka.pageviews-by-user"
HOUR = 3_600_000


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


# ------------------------------------------------------------------ idle sources
def upstream_counter(base_dir=None) -> TaskHarness:  # type: ignore[no-untyped-def]
    config = load_config(
        CONFIG / "pageview-counter.properties",
        ["watermark.upstream.tasks=2", "window.allowed.lateness.ms=0", "window.late.stream=kafka.late"],
    )
    return TaskHarness(PageViewCounterTask, config, base_dir=base_dir)


def forwarded(h: TaskHarness, source: int, seq: int, progress: int, user: str, ts: int) -> None:
    v = {"view_id": f"s{source}-{seq}", "user_id": user, "page": "/", "ts": ts}
    h.send(INPUT, user, v, headers=[lineage_header(str(source), seq, progress)])


def idle(h: TaskHarness, source: int, progress: int) -> None:
    headers, body = control_message(IDLE, str(source), progress)
    h.send(INPUT, None, body, headers=headers)


def test_an_idle_source_stops_holding_the_watermark_back_until_its_next_record(tmp_path):
    h = upstream_counter(tmp_path)
    forwarded(h, 0, 0, MIN_MS, "u1", 10)
    forwarded(h, 0, 1, 10, "u1", HOUR + 5)
    h.window()
    assert records(h) == []  # source 1 silent: the watermark stays at its start
    idle(h, 1, MIN_MS)
    assert [(m["window_start"], m["count"]) for m in records(h)] == [(0, 1)]
    forwarded(h, 0, 2, HOUR + 5, "u1", 3 * HOUR)  # source 0 alone moves the watermark on
    h.window()
    assert [(m["window_start"], m["count"]) for m in records(h)] == [(0, 1), (HOUR, 1)]
    h.commit()
    for store in h.stores.values():
        store.close()

    again = upstream_counter(tmp_path)  # the idle flag is state: restored with the store
    forwarded(again, 0, 3, 3 * HOUR, "u2", 4 * HOUR + 1)
    again.window()
    assert [(m["window_start"], m["count"]) for m in records(again)] == [(3 * HOUR, 1)]
    # source 1 resumes: its view's hour has closed meanwhile, so it is late; the watermark does
    # not go back, and now waits for source 1 again
    forwarded(again, 1, 0, MIN_MS, "u3", 2 * HOUR)
    assert [o.message["view_id"] for o in again.outputs if o.system_stream.stream == "late"] == ["s1-0"]
    forwarded(again, 0, 4, 4 * HOUR + 1, "u2", 6 * HOUR)
    again.window()
    assert len(records(again)) == 1  # held back by source 1 (progress 2h) again


def test_when_every_source_is_idle_the_windows_they_reached_close_whatever_order_they_went_idle(tmp_path):
    """The active source says idle before the silent one (both reach their idle timeout at
    about the same time): once both are idle, time is what the sources reached."""
    h = upstream_counter(tmp_path)
    forwarded(h, 0, 0, MIN_MS, "u1", 10)
    forwarded(h, 0, 1, 10, "u1", HOUR + 5)
    idle(h, 0, HOUR + 5)
    h.window()
    assert records(h) == []  # source 1 silent and not idle: it holds the watermark
    idle(h, 1, MIN_MS)
    assert [(m["window_start"], m["count"]) for m in records(h)] == [(0, 1)]
    forwarded(h, 1, 0, MIN_MS, "u2", 30)  # source 1 wakes up: late for an hour that closed
    assert [o.message["view_id"] for o in h.outputs if o.system_stream.stream == "late"] == ["s1-0"]


def test_repartition_says_idle_once_after_its_timeout_and_again_after_new_input(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("samzapy.jobs.pageview_repartition.time.monotonic", lambda: clock[0])
    config = load_config(CONFIG / "pageview-repartition.properties", ["window.idle.timeout.ms=1000"])
    h = TaskHarness(PageViewRepartitionTask, config, partition=1)
    h.send("kafka.pageviews", "/p", {"view_id": "v0", "user_id": "u1", "page": "/p", "ts": 7000})
    clock[0] += 0.5
    h.window()
    assert [dict(o.headers).get(CONTROL_HEADER) for o in h.outputs] == [None] + [b"watermark"] * 4
    clock[0] += 0.6
    h.window()
    h.window()
    idles = [o for o in h.outputs if dict(o.headers).get(CONTROL_HEADER) == IDLE]
    assert [o.partition for o in idles] == [0, 1, 2, 3]
    assert idles[0].message == {"control": "idle", "source": "1", "watermark": 7000}
    h.send("kafka.pageviews", "/p", {"view_id": "v1", "user_id": "u1", "page": "/p", "ts": 8000}, offset=1)
    clock[0] += 1.1
    h.window()
    assert len([o for o in h.outputs if dict(o.headers).get(CONTROL_HEADER) == IDLE]) == 8


def test_hopping_windows_after_a_repartition_skip_the_windows_the_views_own_source_closed():
    config = load_config(
        CONFIG / "pageview-counter.properties",
        [
            "watermark.upstream.tasks=2",
            "window.allowed.lateness.ms=0",
            "window.type=hopping",
            "window.size.ms=100",
            "window.advance.ms=50",
        ],
    )
    h = TaskHarness(PageViewCounterTask, config)
    # source 1 had reached 110 before this view at 60: [0, 100) is closed for it, although
    # the task's watermark (source 0 silent) has not closed anything
    forwarded(h, 1, 0, 110, "u1", 60)
    for source in (0, 1):
        h.send(INPUT, None, {"control": "end-of-stream", "source": str(source)}, headers=EOS_HEADERS)
    assert sorted((m["window_start"], m["count"]) for m in records(h)) == [(50, 1)]


def test_sliding_windows_after_a_repartition_count_the_views_of_every_source():
    config = load_config(
        CONFIG / "pageview-counter.properties",
        [
            "window.type=sliding",
            "window.size.ms=100",
            "watermark.upstream.tasks=2",
            "window.allowed.lateness.ms=0",
        ],
    )
    h = TaskHarness(PageViewCounterTask, config)
    forwarded(h, 0, 0, 10, "u1", 10)
    forwarded(h, 1, 0, 50, "u1", 50)
    forwarded(h, 0, 1, 80, "u1", 80)
    for source in (0, 1):
        h.send(INPUT, None, {"control": "end-of-stream", "source": str(source)}, headers=EOS_HEADERS)
    # left windows [t-100, t] of 10, 50, 80; right windows [t+1, t+101] of 10 and 50
    assert sorted((m["window_start"], m["count"]) for m in records(h)) == [
        (-90, 1),
        (-50, 2),
        (-20, 3),
        (11, 2),
        (51, 1),
    ]

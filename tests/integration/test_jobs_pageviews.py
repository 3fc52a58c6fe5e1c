"""Page views per user per hour, both stages, on the real dev broker in subprocesses."""

from __future__ import annotations

import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support, next to this file

from jobs_support import (  # noqa: E402
    Feeder,
    assert_never_goes_back,
    committed_store_values,
    crash_rounds,
    dedup_by_id,
    job_config,
    outputs,
    run_to_end,
)
from support import create_topic, metric_sum, read_metrics  # noqa: E402

from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json  # noqa: E402
from samzapy.kafka.partitioner import partition_for_key  # noqa: E402
from samzapy.operators import window_id  # noqa: E402

pytestmark = pytest.mark.integration

HOUR = 3_600_000
LATENESS = 600_000
PARTITIONS = 4


def expected(spec: PageViewSpec) -> tuple[dict[str, dict], list[str]]:
    """The final window counts (by window id) and the late view ids, computed from the
    generated records: a view is late when its hour ended at least LATENESS before the
    largest event time its source partition (page key) had shown before it."""
    by_source: dict[int, list[dict]] = defaultdict(list)
    for key, view in pageviews(spec):
        by_source[partition_for_key(key, PARTITIONS)].append(view)
    counts: Counter = Counter()
    late = []
    for views in by_source.values():
        progress = None
        for view in views:
            start = view["ts"] - view["ts"] % HOUR
            if progress is not None and start + HOUR <= progress - LATENESS:
                late.append(view["view_id"])
            else:
                counts[(view["user_id"], start)] += 1
            progress = view["ts"] if progress is None else max(progress, view["ts"])
    windows = {
        window_id(user.encode(), start, start + HOUR): {
            "user_id": user,
            "window_start": start,
            "window_end": start + HOUR,
            "count": n,
        }
        for (user, start), n in counts.items()
    }
    return windows, sorted(late)


def setup_pipeline(
    tmp_path: Path, broker: str, tag: str, spec: PageViewSpec, feed: bool = True
) -> tuple[Path, Path, dict]:
    topics = {name: f"{name}-{tag}" for name in ("pageviews", "by-user", "counts", "late")}
    create_topic(broker, topics["pageviews"], PARTITIONS)
    create_topic(broker, topics["by-user"], PARTITIONS)
    if feed:
        produce_json(broker, topics["pageviews"], PARTITIONS, pageviews(spec))
        produce_end_of_stream(broker, topics["pageviews"])
    repartition = job_config(
        tmp_path,
        broker,
        "pageview-repartition.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['pageviews']}",
            "repartition.output.stream": f"kafka.{topics['by-user']}",
            f"systems.kafka.streams.{topics['by-user']}.partitions": str(PARTITIONS),
        },
    )
    counter = job_config(
        tmp_path,
        broker,
        "pageview-counter.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['by-user']}",
            "window.output.stream": f"kafka.{topics['counts']}",
            "window.late.stream": f"kafka.{topics['late']}",
            "window.allowed.lateness.ms": str(LATENESS),
            "watermark.upstream.tasks": str(PARTITIONS),
        },
    )
    return repartition, counter, topics


def window_outputs(broker: str, topics: dict) -> tuple[list, dict[str, dict], list[str]]:
    records = outputs(broker, topics["counts"])
    unique = dedup_by_id(records)
    for record in unique.values():
        assert record.key == orjson.loads(record.value)["user_id"].encode()
    late = sorted(
        orjson.loads(r.value)["view_id"] for r in dedup_by_id(outputs(broker, topics["late"])).values()
    )
    return records, {rid: orjson.loads(r.value) for rid, r in unique.items()}, late


SPEC = PageViewSpec(count=8_000, users=40, pages=30, seed=11, disorder_ms=300_000, late_fraction=0.03)


def test_counts_per_user_per_hour_are_exact_with_late_views_counted_and_sent_aside(tmp_path, broker):
    repartition, counter, topics = setup_pipeline(tmp_path, broker, "pv-clean", SPEC)
    metrics = tmp_path / "counter-metrics.json"

    run_to_end(repartition)
    run_to_end(counter, metrics)

    want_windows, want_late = expected(SPEC)
    records, windows, late = window_outputs(broker, topics)
    assert windows == want_windows
    assert len(records) == len(windows)  # no crash: each window emitted once
    assert late == want_late and 0 < len(late) < SPEC.count * 0.05
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "task.", "late-messages") == len(want_late)
    assert metric_sum(snapshot, "task.", "late-messages-total") == len(want_late)


@pytest.mark.crash
def test_kill9_of_both_stages_loses_and_doubles_nothing(tmp_path, broker):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    spec = PageViewSpec(count=30_000, users=40, pages=30, seed=12, disorder_ms=300_000, late_fraction=0.03)
    repartition, counter, topics = setup_pipeline(tmp_path, broker, "pv-crash", spec, feed=False)
    metrics = tmp_path / "counter-metrics.json"
    feeder = Feeder(
        lambda chunk: produce_json(broker, topics["pageviews"], PARTITIONS, chunk),
        list(pageviews(spec)),
        chunks=12,
        pause_s=1.0,
        finish=lambda: produce_end_of_stream(broker, topics["pageviews"]),
    )
    feeder.start()

    delays = crash_rounds([repartition, counter], broker, 3, rng, tmp_path / "jobs.log")
    feeder.join_checked()
    run_to_end(repartition)
    run_to_end(counter, metrics)

    context = f"seed {seed}, kill delays {delays}"
    want_windows, want_late = expected(spec)
    _, windows, late = window_outputs(broker, topics)
    assert windows == want_windows, context
    assert late == want_late, context
    # the stored late count is exactly-once across the crashes; the metric counts this run only
    assert metric_sum(read_metrics(metrics), "task.", "late-messages-total") == len(want_late), context
    assert_never_goes_back(committed_store_values(broker, counter, "pageview-counts", b"et\x00wm"))
    assert_never_goes_back(committed_store_values(broker, repartition, "repartition-progress", b"rp\x00wm"))


def expected_sessions(views: list[dict], gap: int) -> dict[str, dict]:
    """Sessions per user computed offline: sorted times, split where two are gap or more apart."""
    times: dict[str, list[int]] = defaultdict(list)
    for view in views:
        times[view["user_id"]].append(view["ts"])
    sessions = {}
    for user, ts in times.items():
        ts.sort()
        start = prev = ts[0]
        n = 0
        for t in [*ts, None]:
            if t is not None and t - prev < gap:
                n += 1
                prev = t
                continue
            end = prev + gap
            sessions[window_id(user.encode(), start, end)] = {
                "user_id": user,
                "window_start": start,
                "window_end": end,
                "count": n,
            }
            if t is not None:
                start = prev = t
                n = 1
    return sessions


def test_session_windows_end_to_end_merge_and_split_like_offline_sessionization(tmp_path, broker):
    gap = 120_000
    spec = PageViewSpec(count=4_000, users=30, pages=10, seed=13, disorder_ms=20_000)
    views = [v for _, v in pageviews(spec)]
    topics = {name: f"{name}-sessions" for name in ("by-user", "sessions")}
    produce_json(broker, topics["by-user"], PARTITIONS, ((v["user_id"].encode(), v) for v in views))
    produce_end_of_stream(broker, topics["by-user"])
    counter = job_config(
        tmp_path,
        broker,
        "pageview-counter.properties",
        "sessions",
        {
            "task.inputs": f"kafka.{topics['by-user']}",
            "window.output.stream": f"kafka.{topics['sessions']}",
            "window.type": "session",
            "window.gap.ms": str(gap),
            "window.allowed.lateness.ms": "60000",
            "watermark.upstream.tasks": "0",  # the input is keyed by user already
        },
    )

    run_to_end(counter)

    unique = dedup_by_id(outputs(broker, topics["sessions"]))
    got = {rid: orjson.loads(r.value) for rid, r in unique.items()}
    want = expected_sessions(views, gap)
    assert got == want
    counts = Counter(s["count"] for s in want.values())
    assert counts[1] and sum(n for n in counts if n > 1)  # both lone views and merged sessions

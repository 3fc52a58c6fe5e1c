"""The window job's sliding and count windows and its update / early emission, on the real dev
broker in subprocesses, exact against offline computations after 3 kill -9 rounds."""

from __future__ import annotations

import bisect
import random
import sys
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support, next to this file

from jobs_support import Feeder, crash_rounds, dedup_by_id, job_config, outputs, run_to_end  # noqa: E402
from support import consume_all, create_topic, header, kill9, start_job, wait_for  # noqa: E402

from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json  # noqa: E402
from samzapy.kafka.partitioner import partition_for_key  # noqa: E402
from samzapy.operators import window_id  # noqa: E402
from samzapy.operators.count_windows import count_window_id  # noqa: E402
from samzapy.operators.event_time import CONTROL_HEADER, IDLE  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 4
LATENESS = 600_000
#: Disorder below the lateness: no view is late, so every kind's result is its definition's.
SPEC = PageViewSpec(count=12_000, users=40, pages=30, seed=21, disorder_ms=300_000)
SLIDING_MS = 60_000
COUNT_SIZE, COUNT_STEP = 5, 2
HOUR = 3_600_000


def views(spec: PageViewSpec = SPEC) -> list[tuple[bytes, dict]]:
    """The views keyed by user (the job's input is keyed by user: direct mode)."""
    return [(v["user_id"].encode(), v) for _, v in pageviews(spec)]


def by_user(records: list[tuple[bytes, dict]]) -> dict[str, list[int]]:
    times: dict[str, list[int]] = defaultdict(list)
    for _, view in records:
        times[view["user_id"]].append(view["ts"])
    return times


def message(user: str, start: int, end: int, n: int) -> dict:
    return {"user_id": user, "window_start": start, "window_end": end, "count": n}


def expected_sliding(records: list[tuple[bytes, dict]], d: int) -> dict[str, dict]:
    """Left window [t-d, t] of every view, right window [t+1, t+d+1] of every view with a later
    one of its user within d+1; counts by bisection over the sorted times."""
    out = {}
    for user, ts in by_user(records).items():
        ts.sort()
        starts = {t - d for t in ts}
        for t in ts:
            j = bisect.bisect_right(ts, t)
            if j < len(ts) and ts[j] <= t + d + 1:
                starts.add(t + 1)
        for s in starts:
            n = bisect.bisect_right(ts, s + d) - bisect.bisect_left(ts, s)
            out[window_id(user.encode(), s, s + d + 1)] = message(user, s, s + d + 1, n)
    return out


def expected_count(records: list[tuple[bytes, dict]], size: int, step: int) -> dict[str, dict]:
    """Complete count windows of each user's views in production order."""
    out = {}
    for user, ts in by_user(records).items():
        for first in range(0, len(ts) - size + 1, step):
            chunk = ts[first : first + size]
            out[count_window_id(user.encode(), first)] = message(user, min(chunk), max(chunk) + 1, size)
    return out


def expected_tumbling(records: list[tuple[bytes, dict]]) -> dict[str, dict]:
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for _, view in records:
        counts[(view["user_id"], view["ts"] - view["ts"] % HOUR)] += 1
    return {window_id(u.encode(), s, s + HOUR): message(u, s, s + HOUR, n) for (u, s), n in counts.items()}


def expected_hopping(records: list[tuple[bytes, dict]], size: int, advance: int) -> dict[str, dict]:
    """Every window [s, s + size) with s a multiple of ``advance`` that holds a view."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for _, view in records:
        t = view["ts"]
        first = (t - size + advance) // advance * advance
        for start in range(first, t + 1, advance):
            if start <= t < start + size:
                counts[(view["user_id"], start)] += 1
    return {window_id(u.encode(), s, s + size): message(u, s, s + size, n) for (u, s), n in counts.items()}


CASES = {
    "sliding": ({"window.type": "sliding", "window.size.ms": str(SLIDING_MS)}, "final"),
    "count": (
        {"window.type": "count", "window.count.size": str(COUNT_SIZE), "window.count.step": str(COUNT_STEP)},
        "final",
    ),
    # window() every 100 ms (not the job's 1 s): every run of a crash round lasts long enough
    # for open windows to fire early
    "update+early": (
        {"window.emit": "update", "window.early.fire.ms": "150", "task.window.ms": "100"},
        "update",
    ),
    "hopping+update": (
        {"window.type": "hopping", "window.advance.ms": str(HOUR // 4), "window.emit": "update"},
        "update",
    ),
}


def direct_counter(
    tmp_path: Path, broker: str, tag: str, partitions: int, overrides: dict[str, str]
) -> tuple[Path, dict]:
    """The counter in direct mode (input keyed by user, no upstream stage) on a fresh input
    topic of ``partitions``; its config and topics."""
    topics = {n: f"{n}-{tag}" for n in ("by-user", "counts")}
    create_topic(broker, topics["by-user"], partitions)
    config = job_config(
        tmp_path,
        broker,
        "pageview-counter.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['by-user']}",
            "window.output.stream": f"kafka.{topics['counts']}",
            "window.late.stream": "",
            "watermark.upstream.tasks": "0",
            **overrides,
        },
    )
    return config, topics


def setup(tmp_path: Path, broker: str, case: str) -> tuple[Path, dict]:
    overrides, _ = CASES[case]
    tag = f"win-{case.replace('+', '-')}"
    return direct_counter(
        tmp_path, broker, tag, PARTITIONS, {"window.allowed.lateness.ms": str(LATENESS), **overrides}
    )


def check(case: str, records: list, broker: str, topics: dict, context: str) -> None:
    """Finals exact against the offline computation; updates: each window's update counts are
    1..n (each view once), early results never above the final count."""
    unique = {rid: orjson.loads(r.value) for rid, r in dedup_by_id(outputs(broker, topics["counts"])).items()}
    if case == "sliding":
        assert unique == expected_sliding(records, SLIDING_MS), context
        return
    if case == "count":
        assert unique == expected_count(records, COUNT_SIZE, COUNT_STEP), context
        return
    want = (
        expected_hopping(records, HOUR, HOUR // 4) if case == "hopping+update" else expected_tumbling(records)
    )
    finals = {rid: m for rid, m in unique.items() if m["final"]}
    fields = ("user_id", "window_start", "window_end", "count")
    stripped = {rid: {k: m[k] for k in fields} for rid, m in finals.items()}
    assert stripped == want, context
    assert all(m["window_id"] == rid and not m["late"] for rid, m in finals.items()), context
    updates: dict[str, list[int]] = defaultdict(list)
    early = 0
    for rid, m in unique.items():
        if m["final"]:
            continue
        assert m["count"] <= want[m["window_id"]]["count"], context
        if ":e:" in rid or ":el:" in rid:
            early += 1
        else:
            updates[m["window_id"]].append(m["count"])
    assert {w: sorted(c) for w, c in updates.items()} == {
        w: list(range(1, m["count"] + 1)) for w, m in want.items()
    }, context
    if "early" in case:
        assert early > 0, "no early result was emitted"


@pytest.mark.crash
@pytest.mark.parametrize("case", list(CASES))
def test_window_kinds_and_modes_are_exact_after_kill9_rounds(tmp_path, broker, case):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    config, topics = setup(tmp_path, broker, case)
    records = views()
    feeder = Feeder(
        lambda chunk: produce_json(broker, topics["by-user"], PARTITIONS, chunk),
        records,
        chunks=10,
        pause_s=0.8,
        finish=lambda: produce_end_of_stream(broker, topics["by-user"]),
    )
    feeder.start()
    delays = crash_rounds([config], broker, 3, rng, tmp_path / "jobs.log")
    feeder.join_checked()
    run_to_end(config)
    check(case, records, broker, topics, f"{case}: seed {seed}, kill delays {delays}")


# ------------------------------------------------------------------ idle sources
IDLE_PARTITIONS = 2


def idle_pipeline(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict, dict[str, dict]]:
    """Views on partition 0 of a 2-partition topic only (partition 1 stays silent, no
    end-of-stream anywhere); the repartition stage runs until its silent task has said it is
    idle, then is stopped. Returns the counter's config, the topics and the expected windows:
    every hour that ends at or before the largest view time (the active source's progress)."""
    topics = {n: f"{n}-{tag}" for n in ("pageviews", "by-user", "counts")}
    create_topic(broker, topics["pageviews"], IDLE_PARTITIONS)
    create_topic(broker, topics["by-user"], IDLE_PARTITIONS)
    spec = PageViewSpec(count=3_000, users=20, pages=40, seed=23, span_ms=5 * HOUR)
    records = [(k, v) for k, v in pageviews(spec) if partition_for_key(k, IDLE_PARTITIONS) == 0]
    produce_json(broker, topics["pageviews"], IDLE_PARTITIONS, records)
    repartition = job_config(
        tmp_path,
        broker,
        "pageview-repartition.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['pageviews']}",
            "repartition.output.stream": f"kafka.{topics['by-user']}",
            f"systems.kafka.streams.{topics['by-user']}.partitions": str(IDLE_PARTITIONS),
            "window.idle.timeout.ms": "1500",
        },
    )
    job = start_job(repartition, log=tmp_path / "repartition.log")
    try:
        wait_for(
            lambda: (
                sum(
                    header(r, CONTROL_HEADER) == IDLE and orjson.loads(r.value)["source"] == "1"
                    for r in consume_all(broker, topics["by-user"])
                )
                >= IDLE_PARTITIONS
            ),
            timeout=90,
            what="the silent repartition task's idle records",
        )
    finally:
        kill9(job)
    counter = job_config(
        tmp_path,
        broker,
        "pageview-counter.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['by-user']}",
            "window.output.stream": f"kafka.{topics['counts']}",
            "window.late.stream": "",
            "window.allowed.lateness.ms": "0",
            "watermark.upstream.tasks": str(IDLE_PARTITIONS),
        },
    )
    progress = max(v["ts"] for _, v in records)
    want = {rid: m for rid, m in expected_tumbling(records).items() if m["window_end"] <= progress}
    return counter, topics, want


def test_idle_timeout_lets_windows_close_while_one_source_is_silent(tmp_path, broker):
    counter, topics, want = idle_pipeline(tmp_path, broker, "win-idle")
    assert len(want) >= 20

    def got() -> dict[str, dict]:
        emitted = dedup_by_id(outputs(broker, topics["counts"]))
        return {rid: orjson.loads(r.value) for rid, r in emitted.items()}

    job = start_job(counter, log=tmp_path / "counter.log")
    try:
        wait_for(lambda: len(got()) >= len(want), timeout=60, what="every closed window's count")
    finally:
        kill9(job)
    assert got() == want


def test_exit_at_end_emits_the_windows_its_input_closed_before_the_first_window_call(tmp_path, broker):
    """--exit-at-end with ``task.window.ms`` far longer than the run, in direct mode (no
    control records, so only ``window()`` closes windows): the input is read before any timed
    ``window()`` call, and the windows it closed are still emitted, each exactly once, by a
    last ``window()`` before the final commit."""
    config, topics = direct_counter(
        tmp_path,
        broker,
        "win-exit-at-end",
        1,
        {"window.allowed.lateness.ms": "0", "task.window.ms": "600000"},
    )
    records = views(PageViewSpec(count=2_000, users=20, pages=10, seed=31, span_ms=5 * HOUR))
    produce_json(broker, topics["by-user"], 1, records)
    progress = max(v["ts"] for _, v in records)
    want = {rid: m for rid, m in expected_tumbling(records).items() if m["window_end"] <= progress}
    assert len(want) >= 80
    run_to_end(config)
    emitted = outputs(broker, topics["counts"])
    assert len(emitted) == len(want)
    assert {rid: orjson.loads(r.value) for rid, r in dedup_by_id(emitted).items()} == want


# ------------------------------------------------------------------ sliding after a repartition
@pytest.mark.crash
def test_sliding_windows_after_the_repartition_stage_are_exact_after_kill9_rounds(tmp_path, broker):
    """The whole pipeline (views keyed by view, repartitioned by user, then counted): the
    counter's input interleaves the upstream tasks' outputs, and the windows are still the
    definition's, through 3 kill -9 rounds of the counter."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    tag = "win-sliding-repartitioned"
    topics = {n: f"{n}-{tag}" for n in ("pageviews", "by-user", "counts")}
    create_topic(broker, topics["pageviews"], PARTITIONS)
    create_topic(broker, topics["by-user"], PARTITIONS)
    spec = PageViewSpec(count=6_000, users=40, pages=30, seed=27, disorder_ms=300_000)
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
            "window.late.stream": "",
            "window.allowed.lateness.ms": str(LATENESS),
            "watermark.upstream.tasks": str(PARTITIONS),
            "window.type": "sliding",
            "window.size.ms": str(SLIDING_MS),
        },
    )
    run_to_end(repartition)
    delays = crash_rounds([counter], broker, 3, rng, tmp_path / "jobs.log")
    run_to_end(counter)
    unique = {rid: orjson.loads(r.value) for rid, r in dedup_by_id(outputs(broker, topics["counts"])).items()}
    records = [(v["user_id"].encode(), v) for _, v in pageviews(spec)]
    assert unique == expected_sliding(records, SLIDING_MS), f"seed {seed}, kill delays {delays}"

"""The test driver's crash and restart: the window counter (jobs/pageview_counter.py, RocksDB
stores with an object cache) crashed in-process at each crash point and restarted gives the
same outputs (ids and bytes, once duplicates are dropped by id) and the same store and
changelog state as an uninterrupted run of the same script."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from samzapy.config import load_config
from samzapy.jobs.pageview_counter import PageViewCounterTask
from samzapy.testing import TaskHarness, distinct_by_id

CONFIG = Path(__file__).parents[2] / "config" / "pageview-counter.properties"
INPUT = "kafka.pageviews-by-user"
Action = Callable[[TaskHarness], None]


def counter() -> TaskHarness:
    overrides = [
        "watermark.upstream.tasks=0",  # the input stream is the one source
        "window.size.ms=100",
        "window.allowed.lateness.ms=20",
        "stores.pageview-counts.object.cache.size=8",  # evictions write before the commit
        "stores.pageview-counts.write.batch.size=4",
    ]
    return TaskHarness(PageViewCounterTask, load_config(CONFIG, overrides))


def view(n: int, user: str, ts: int) -> Action:
    return lambda h: h.send(INPUT, user, {"view_id": f"v{n}", "user_id": user, "page": "/", "ts": ts})


def script(seed: int = 7, views: int = 120) -> list[Action]:
    """Views of five users, out of order by up to 80 ms (some late), a window() call every 9
    steps and a commit every 25, then end-of-stream, a last window() and commit."""
    rng = random.Random(seed)
    actions: list[Action] = []
    for n in range(views):
        actions.append(view(n, f"u{rng.randrange(5)}", n * 10 - rng.randrange(80)))
        if n % 9 == 8:
            actions.append(TaskHarness.window)
        if n % 25 == 24:
            actions.append(TaskHarness.commit)
    return [*actions, lambda h: h.end_of_stream(), TaskHarness.window, TaskHarness.commit]


def run(crashes: dict[int, Action]) -> TaskHarness:
    """Run the script, applying ``crashes[i]`` (a crash, or arming one) before step i, and
    restarting whenever the task is down after a step."""
    h = counter()
    for i, action in enumerate(script()):
        if i in crashes:
            crashes[i](h)
        if h.state == "crashed":
            h.restart()
        action(h)
        if h.state == "crashed":
            h.restart()
    return h


def by_id(h: TaskHarness, stream: str) -> dict[str, tuple[object, object]]:
    """A stream's records by id, one of each (key and value bytes)."""
    return {i: (r.key, r.value) for i, r in distinct_by_id(h.records(stream)).items()}


def outcome(h: TaskHarness) -> dict[str, object]:
    """What a consumer and a restore see: outputs and late views by id, store and changelog."""
    return {
        "counts": by_id(h, "kafka.pageview-counts"),
        "late": by_id(h, "kafka.pageviews-late"),
        "store": dict(h.stores["pageview-counts"].all()),
        "changelog": h.changelogs["pageview-counts"].latest(),
    }


@pytest.fixture(scope="module")
def uninterrupted() -> dict[str, object]:
    h = run({})
    try:
        assert h.generation == 1
        counts, late = h.records("kafka.pageview-counts"), h.records("kafka.pageviews-late")
        assert len(counts) == len(distinct_by_id(counts)) > 20  # no copies without a crash
        assert len(late) == len(distinct_by_id(late)) > 0  # the script has late views
        return outcome(h)
    finally:
        h.close()


def crash(unacknowledged: str = "lose") -> Action:
    return lambda h: h.crash(unacknowledged)  # type: ignore[arg-type]


def arm(point: str, after: int, unacknowledged: str = "lose") -> Action:
    return lambda h: h.crash_at(point, after=after, unacknowledged=unacknowledged)  # type: ignore[arg-type]


CASES = {
    "between-messages-before-any-commit": {10: crash()},
    "between-messages": {70: crash()},
    "between-messages-unacknowledged-landed": {95: crash("land")},
    "after-changelog-send": {0: arm("after-changelog-send", 30)},
    "after-changelog-send-landed": {40: arm("after-changelog-send", 12, "land")},
    "after-output-send": {0: arm("after-output-send", 9)},
    "after-producer-flush": {0: arm("after-producer-flush", 2)},
    "after-local-checkpoint": {0: arm("after-local-checkpoint", 3)},
    "after-checkpoint-send-lost": {0: arm("after-checkpoint-send", 2)},
    "after-checkpoint-send-landed": {0: arm("after-checkpoint-send", 4, "land")},
    "twice": {33: crash(), 34: arm("after-output-send", 3, "land")},
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_crashed_and_restarted_window_counter_matches_an_uninterrupted_run(
    case: str, uninterrupted: dict[str, object]
) -> None:
    h = run(CASES[case])
    try:
        assert h.generation == 1 + len(CASES[case])  # every crash happened, each was restarted
        assert outcome(h) == uninterrupted
    finally:
        h.close()


def test_a_crash_after_the_flush_re_sends_outputs_with_the_same_ids_and_bytes() -> None:
    """Outputs acknowledged after the last checkpoint are sent again by the restart: the copies
    carry the first ones' ids and bytes (distinct_by_id checks), so a consumer drops them."""
    h = counter()
    for n, ts in enumerate([10, 20, 150, 30]):
        view(n, "u1", ts)(h)
    h.commit()
    h.end_of_stream()  # closes both windows: emitted, then
    h.crash_at("after-producer-flush")
    h.commit()  # acknowledged, no checkpoint: crash
    assert h.state == "crashed"
    h.restart()  # replays end-of-stream: the same window again
    h.commit()
    counts = h.records("kafka.pageview-counts")
    assert [r.id for r in counts] == ["w:7531:0:100", "w:7531:100:200"] * 2
    assert len(distinct_by_id(counts)) == 2
    h.close()

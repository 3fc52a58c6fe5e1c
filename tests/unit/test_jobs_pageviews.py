"""Page views per user per hour (both stages), in-process with the TaskHarness."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import load_config
from samzapy.jobs.pageview_counter import PageViewCounterTask
from samzapy.jobs.pageview_repartition import PageViewRepartitionTask
from samzapy.operators import window_id
from samzapy.operators.event_time import (
    CONTROL_HEADER,
    END_OF_STREAM,
    Lineage,
    end_of_stream_record,
    lineage_header,
)
from samzapy.operators.key_encoding import MAX_MS, MIN_MS
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config"
HOUR = 3_600_000
EOS_HEADERS = end_of_stream_record()[0]


def harness(task, config_file: str, *overrides: str, base_dir: Path | None = None, partition: int = 0):
    return TaskHarness(
        task, load_config(CONFIG / config_file, overrides), partition=partition, base_dir=base_dir
    )


def view(n: int, user: str, ts: int, page: str = "/page/1") -> dict:
    return {"view_id": f"v{n}", "user_id": user, "page": page, "ts": ts}


def counts(outputs) -> dict[str, dict]:
    return {o.id: o.message for o in outputs if o.system_stream.stream == "pageview-counts"}


# ----------------------------------------------------------------- stage 1: repartition
def test_repartition_rekeys_by_user_and_tags_each_view_with_its_source_progress():
    h = harness(PageViewRepartitionTask, "pageview-repartition.properties", partition=2)
    h.send("kafka.pageviews", "/page/1", view(0, "u1", 5000))
    h.send("kafka.pageviews", "/page/1", view(1, "u2", 3000))
    h.send("kafka.pageviews", "/page/1", view(2, "u1", 9000))

    first, second, third = h.outputs
    assert (first.key, second.key, third.key) == ("u1", "u2", "u1")
    assert first.system_stream.stream == "pageviews-by-user" and first.message == view(0, "u1", 5000)
    tags = [Lineage.parse(dict(o.headers)["samzapy.lineage"]) for o in h.outputs]
    assert tags == [Lineage("2", 0, MIN_MS), Lineage("2", 1, 5000), Lineage("2", 2, 5000)]
    assert [o.id for o in h.outputs] == [f"Partition 2:pageviews:{n}:0" for n in range(3)]


def test_repartition_broadcasts_progress_to_every_partition_once_per_advance():
    h = harness(PageViewRepartitionTask, "pageview-repartition.properties", partition=1)
    h.send("kafka.pageviews", "/p", view(0, "u1", 7000))
    h.window()
    h.window()  # no progress since: nothing more

    markers = h.outputs[1:]
    assert [m.partition for m in markers] == [0, 1, 2, 3]
    assert all(dict(m.headers)[CONTROL_HEADER] == b"watermark" for m in markers)
    assert markers[0].message == {"control": "watermark", "source": "1", "watermark": 7000}
    assert markers[0].id == "watermark:pageviews-by-user:1:7000:0"


def test_repartition_forwards_end_of_stream_to_every_partition():
    h = harness(PageViewRepartitionTask, "pageview-repartition.properties")
    h.send("kafka.pageviews", None, {"control": "end-of-stream"}, headers=EOS_HEADERS)

    assert [o.partition for o in h.outputs] == [0, 1, 2, 3]
    assert all(dict(o.headers)[CONTROL_HEADER] == END_OF_STREAM for o in h.outputs)
    assert h.outputs[0].message == {"control": "end-of-stream", "source": "0"}


def test_repartition_progress_survives_a_restart(tmp_path):
    h = harness(PageViewRepartitionTask, "pageview-repartition.properties", base_dir=tmp_path)
    h.send("kafka.pageviews", "/p", view(0, "u1", 7000))
    h.commit()
    for store in h.stores.values():
        store.close()
    again = harness(PageViewRepartitionTask, "pageview-repartition.properties", base_dir=tmp_path)
    again.send("kafka.pageviews", "/p", view(1, "u1", 1000), offset=1)
    assert Lineage.parse(dict(again.outputs[0].headers)["samzapy.lineage"]).progress == 7000


# ----------------------------------------------------------------- stage 2: counter
def forwarded(h, source: int, seq: int, progress: int, v: dict) -> None:
    h.send("kafka.pageviews-by-user", v["user_id"], v, headers=[lineage_header(str(source), seq, progress)])


def end_of(h, source: int) -> None:
    headers, _ = end_of_stream_record(str(source))
    h.send(
        "kafka.pageviews-by-user", None, {"control": "end-of-stream", "source": str(source)}, headers=headers
    )


def counter(*overrides: str, base_dir=None):
    return harness(
        PageViewCounterTask,
        "pageview-counter.properties",
        "watermark.upstream.tasks=2",
        "window.allowed.lateness.ms=0",
        *overrides,
        base_dir=base_dir,
    )


def test_counter_emits_a_window_once_every_source_has_passed_its_end():
    h = counter()
    forwarded(h, 0, 0, MIN_MS, view(0, "u1", 10))
    forwarded(h, 0, 1, 10, view(1, "u1", HOUR + 5))  # source 0 is past the first hour
    h.window()
    assert counts(h.outputs) == {}  # source 1 has not been heard from
    forwarded(h, 1, 0, MIN_MS, view(2, "u2", HOUR + 7))
    h.window()

    assert counts(h.outputs) == {
        window_id(b"u1", 0, HOUR): {"user_id": "u1", "window_start": 0, "window_end": HOUR, "count": 1}
    }


def test_lateness_is_judged_by_the_views_own_source_not_the_fastest_one():
    h = counter("window.late.stream=kafka.late")
    forwarded(h, 0, 0, MIN_MS, view(0, "u1", 5 * HOUR))  # source 0 far ahead
    forwarded(h, 1, 0, MIN_MS, view(1, "u1", 10))  # on time for its own source
    forwarded(h, 1, 1, 10, view(2, "u1", 2 * HOUR))
    forwarded(h, 1, 2, 2 * HOUR, view(3, "u1", 20))  # behind its source by two hours: late
    for source in (0, 1):
        end_of(h, source)

    assert sorted((m["window_start"], m["count"]) for m in counts(h.outputs).values()) == [
        (0, 1),
        (2 * HOUR, 1),
        (5 * HOUR, 1),
    ]
    late = [o for o in h.outputs if o.system_stream.stream == "late"]
    assert [o.message["view_id"] for o in late] == ["v3"]
    assert late[0].id == "late:Partition 0:pageviews-by-user:3"
    assert h.metrics.counter("late-messages").value == 1
    assert h.metrics.gauge("late-messages-total").read() == 1


def test_allowed_lateness_keeps_a_window_open_for_views_behind_their_source():
    h = counter("window.allowed.lateness.ms=1800000")
    forwarded(h, 0, 0, MIN_MS, view(0, "u1", HOUR + 1_000_000))
    forwarded(h, 0, 1, HOUR + 1_000_000, view(1, "u1", 10))  # 1.3 h behind, window ends 0.3 h behind
    end_of(h, 0)
    end_of(h, 1)
    assert {m["window_start"]: m["count"] for m in counts(h.outputs).values()} == {0: 1, HOUR: 1}
    assert h.metrics.counter("late-messages").value == 0


def test_views_resent_by_a_restarted_upstream_task_are_counted_once():
    h = counter()
    for _ in range(2):  # the upstream task crashed and sent its views again
        forwarded(h, 0, 0, MIN_MS, view(0, "u1", 10))
        forwarded(h, 0, 1, 10, view(1, "u1", 20))
    forwarded(h, 0, 2, 20, view(2, "u1", 30))
    end_of(h, 0)
    end_of(h, 1)
    assert [m["count"] for m in counts(h.outputs).values()] == [3]
    assert h.metrics.counter("duplicates-dropped").value == 2


def test_end_of_stream_from_every_source_flushes_every_window_and_ids_are_window_ids():
    h = counter()
    forwarded(h, 0, 0, MIN_MS, view(0, "u1", 10))
    forwarded(h, 1, 0, MIN_MS, view(1, "u2", 3 * HOUR + 10))
    end_of(h, 0)  # the watermark is now source 1's progress
    assert set(counts(h.outputs)) == {window_id(b"u1", 0, HOUR)}
    end_of(h, 1)
    assert set(counts(h.outputs)) == {window_id(b"u1", 0, HOUR), window_id(b"u2", 3 * HOUR, 4 * HOUR)}
    assert h.task.time.watermark.current == MAX_MS


def test_watermark_never_goes_back_across_a_restart(tmp_path):
    h = counter(base_dir=tmp_path)
    forwarded(h, 0, 0, MIN_MS, view(0, "u1", 5 * HOUR))
    forwarded(h, 1, 0, MIN_MS, view(1, "u1", 4 * HOUR))
    before = h.task.time.watermark.current
    h.commit()
    for store in h.stores.values():
        store.close()
    again = counter(base_dir=tmp_path)
    assert again.task.time.watermark.current == before == 4 * HOUR
    forwarded(again, 1, 1, 4 * HOUR, view(2, "u1", 3 * HOUR))  # not newer: no effect
    assert again.task.time.watermark.current == before


def test_direct_mode_uses_the_tasks_own_input_as_the_source():
    h = counter("watermark.upstream.tasks=0", "window.late.stream=kafka.late")
    h.send("kafka.pageviews-by-user", "u1", view(0, "u1", 10))
    h.send("kafka.pageviews-by-user", "u1", view(1, "u1", 2 * HOUR))
    h.window()
    h.send("kafka.pageviews-by-user", "u1", view(2, "u1", 20))  # its window has closed
    h.send("kafka.pageviews-by-user", None, {"control": "end-of-stream"}, headers=EOS_HEADERS)
    assert {m["window_start"]: m["count"] for m in counts(h.outputs).values()} == {0: 1, 2 * HOUR: 1}
    assert [o.message["view_id"] for o in h.outputs if o.system_stream.stream == "late"] == ["v2"]


def test_session_windows_merge_views_closer_than_the_gap():
    h = counter(
        "watermark.upstream.tasks=0",
        "window.type=session",
        "window.gap.ms=1000",
        "window.allowed.lateness.ms=5000",
    )
    for n, ts in enumerate([0, 500, 5000, 1400, 5900]):  # 1400 extends [0, 1500); 5900 joins 5000
        h.send("kafka.pageviews-by-user", "u1", view(n, "u1", ts))
    h.send("kafka.pageviews-by-user", None, {"control": "end-of-stream"}, headers=EOS_HEADERS)
    sessions = sorted((m["window_start"], m["window_end"], m["count"]) for m in counts(h.outputs).values())
    assert sessions == [(0, 2400, 3), (5000, 6900, 2)]


def test_an_unknown_source_is_an_error_naming_the_config_key():
    h = counter()
    with pytest.raises(Exception, match="watermark.upstream.tasks"):
        forwarded(h, 7, 0, MIN_MS, view(0, "u1", 10))

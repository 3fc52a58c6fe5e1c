"""Pipelines run in-process over every task of the job (PipelineHarness: the real runtime and
stores over an in-memory broker): each stage's exact outputs."""

from __future__ import annotations

import pytest

import samzapy
from samzapy.pipeline.testing import PipelineHarness

MIN = 60_000


def _ts(v: dict) -> int:
    return v["ts"]


def test_map_filter_flat_map_and_sink_in_order() -> None:
    seen: list[tuple[str, str]] = []
    app = samzapy.App("stateless")
    (
        app.stream("words")
        .filter(lambda v: v != "skip")
        .flat_map(lambda v: [v, v + "!"])
        .map(str.upper)
        .sink(lambda k, v: seen.append((k, v)))
        .to("out")
    )
    with PipelineHarness(app) as h:
        h.send_all("words", [("a", "x"), ("b", "skip"), ("c", "y")])
        assert h.outputs("out") == [("a", "X"), ("a", "X!"), ("c", "Y"), ("c", "Y!")]
    assert seen == h.outputs("out")


def test_branch_sends_each_record_to_the_first_matching_branch_and_merge_joins_them() -> None:
    app = samzapy.App("branches")
    small, big = app.stream("n", value=samzapy.long).branch(lambda v: v < 10, lambda v: v >= 5)
    small.map(lambda v: -v).to("small", value=samzapy.long)
    big.to("big", value=samzapy.long)
    small.merge(big).to("all", value=samzapy.long)
    with PipelineHarness(app) as h:
        h.send_all("n", [("a", 1), ("b", 7), ("c", 12)])
        assert h.outputs("small") == [("a", -1), ("b", -7)]
        assert h.outputs("big") == [("c", 12)]
        assert sorted(v for _, v in h.outputs("all")) == [1, 7, 12]


def test_key_by_moves_records_to_the_task_of_their_new_key_and_windows_count_them() -> None:
    app = samzapy.App("counts")
    (
        app.stream("views", timestamp="ts")
        .key_by(lambda v: v["user"])
        .window(samzapy.tumbling(minutes=10), samzapy.count())
        .to("counts")
    )
    views = [(f"/p{i % 5}", {"user": "ann" if i % 3 else "bob", "ts": i * MIN}) for i in range(30)]
    with PipelineHarness(app, partitions=3) as h:
        h.send_all("views", views)
        h.end_of_stream()
        out = sorted((v["key"], v["start"], v["value"]) for _, v in h.outputs("counts"))
    assert out == [
        ("ann", 0, 6), ("ann", 10 * MIN, 7), ("ann", 20 * MIN, 7),
        ("bob", 0, 4), ("bob", 10 * MIN, 3), ("bob", 20 * MIN, 3),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "agg", "expected"),
    [
        (samzapy.hopping(minutes=10, every=5 * MIN), samzapy.sum("n"),
         [(-5 * MIN, 5 * MIN, 3), (0, 10 * MIN, 10), (5 * MIN, 15 * MIN, 7)]),
        (samzapy.session(minutes=3), samzapy.max("n"), [(0, 5 * MIN, 2), (8 * MIN, 11 * MIN, 4)]),
        (samzapy.tumbling(minutes=10), samzapy.min("n"), [(0, 10 * MIN, 1)]),
        (samzapy.tumbling(minutes=10), samzapy.reduce(lambda a, b: a * b, "n"), [(0, 10 * MIN, 24)]),
        (samzapy.tumbling(minutes=10),
         samzapy.aggregate(lambda: {"n": 0, "s": 0}, lambda a, v: {"n": a["n"] + 1, "s": a["s"] + v["n"]}),
         [(0, 10 * MIN, {"n": 4, "s": 10})]),
    ],
)  # fmt: skip
def test_window_kinds_and_aggregations(spec, agg, expected) -> None:
    app = samzapy.App("kinds")
    app.stream("in", timestamp="ts").window(spec, agg).to("out")
    records = [("k", {"n": n, "ts": t * MIN}) for n, t in ((1, 0), (2, 2), (3, 8), (4, 8))]
    with PipelineHarness(app) as h:
        h.send_all("in", records)
        h.end_of_stream()
        out = [(v["start"], v["end"], v["value"]) for _, v in h.outputs("out")]
    assert sorted(out, key=lambda w: w[:2]) == expected


def test_count_windows_emit_on_their_last_record() -> None:
    app = samzapy.App("counted")
    app.stream("in", timestamp="ts").window(samzapy.count_window(2), samzapy.sum("n")).to("out")
    with PipelineHarness(app) as h:
        h.send_all("in", [("k", {"n": n, "ts": n}) for n in range(5)])
        assert [v["value"] for _, v in h.outputs("out")] == [1, 5]


def test_emit_update_sends_every_change_then_the_final_result() -> None:
    app = samzapy.App("updates")
    app.stream("in", timestamp="ts").window(samzapy.tumbling(minutes=1), emit="update").to("out")
    with PipelineHarness(app) as h:
        h.send_all("in", [("k", {"ts": 1}), ("k", {"ts": 2})])
        h.end_of_stream()
        out = [(v["value"], v["final"]) for _, v in h.outputs("out")]
    assert out == [(1, False), (2, False), (2, True)]


def test_records_behind_the_grace_go_to_the_late_topic() -> None:
    app = samzapy.App("late")
    app.stream("in", timestamp="ts").window(samzapy.tumbling(minutes=1), grace=30_000, late_to="late").to(
        "out"
    )
    with PipelineHarness(app) as h:
        h.send_all("in", [("k", {"ts": 0}), ("k", {"ts": 100_000}), ("k", {"ts": 59_000}), ("k", {"ts": 1})])
        h.window()
        h.end_of_stream()
        assert [v for _, v in h.outputs("late")] == [{"ts": 59_000}, {"ts": 1}]
        counts = {v["start"]: v["value"] for _, v in h.outputs("out")}
    assert counts[60_000] == 1


def test_dedup_drops_ids_seen_within_the_retention() -> None:
    app = samzapy.App("dedup")
    app.stream("in", timestamp="ts").dedup(lambda v: v["id"], within=10 * MIN).to("out")
    with PipelineHarness(app) as h:
        h.send_all("in", [("k", {"id": i, "ts": t}) for i, t in ((1, 0), (2, 1), (1, 2), (2, 3), (3, 4))])
        assert [v["id"] for _, v in h.outputs("out")] == [1, 2, 3]


def test_process_gets_its_stores_and_emits() -> None:
    def running_total(record, ctx):
        total = (ctx.stores["totals"].get(record.key) or 0) + record.value
        ctx.stores["totals"].put(record.key, total)
        ctx.emit(total)

    app = samzapy.App("totals")
    (
        app.stream("amounts", value=samzapy.long)
        .process(running_total, stores=[samzapy.store("totals", value=samzapy.long)])
        .to("out", value=samzapy.long)
    )
    with PipelineHarness(app, partitions=2) as h:
        h.send_all("amounts", [("a", 5), ("b", 1), ("a", 2)])
        assert sorted(h.outputs("out")) == [("a", 5), ("a", 7), ("b", 1)]
        assert h.store("totals") == {"a": 7, "b": 1}


def test_a_restart_restores_the_window_state_from_the_changelogs() -> None:
    app = samzapy.App("restart")
    app.stream("in", timestamp="ts").window(samzapy.tumbling(minutes=1)).to("out")
    with PipelineHarness(app) as h:
        h.send_all("in", [("k", {"ts": 1}), ("k", {"ts": 2})])
        h.commit()
        h.send_all("in", [("k", {"ts": 3})])
        h.crash()
        h.restart()  # back to the commit; the third record is processed again
        h.send_all("in", [("k", {"ts": 4})])
        h.end_of_stream()
        assert [v["value"] for _, v in h.outputs("out")] == [4]


def test_an_exception_in_a_user_function_names_the_stage_and_the_functions_line() -> None:
    app = samzapy.App("boom")
    app.stream("in").map(lambda v: v["missing"]).to("out")
    with PipelineHarness(app) as h, pytest.raises(KeyError) as raised:
        h.send("in", "k", {"x": 1})
    notes = "\n".join(raised.value.__notes__)
    assert "in the pipeline's map() at test_pipeline_run.py:" in notes
    assert "(defined at test_pipeline_run.py:" in notes


def test_an_idle_upstream_task_stops_holding_windows_back_after_its_idle_timeout() -> None:
    app = samzapy.App("idle")
    (
        app.stream("views", timestamp="ts")
        .key_by(lambda v: v["user"], idle_timeout=60_000)
        .window(samzapy.tumbling(minutes=1))
        .to("counts")
    )
    with PipelineHarness(app, partitions=2) as h:
        for t in (0, 30_000, 130_000):  # every view read by task 0: task 1 has no input
            h.send("views", "/page", {"user": "ann", "ts": t}, partition=0)
        h.window()
        assert h.outputs("counts") == []  # task 1's progress holds the watermark back
        h.advance_wall_clock(59_000)
        assert h.outputs("counts") == []  # not idle yet
        h.advance_wall_clock(1_000)  # task 1 says it is idle: task 0's progress closes [0, 1 min)
        assert [(v["start"], v["value"]) for _, v in h.outputs("counts")] == [(0, 2)]

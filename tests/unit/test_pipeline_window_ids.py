"""A pipeline window's non-final results carry the window's id (the final result's own id)
from the first update on, so that downstream can upsert by it; sessions name their bounds so
far (docs/pipelines.md, "Event time and windows")."""

from __future__ import annotations

import samzapy
from samzapy.output_ids import window_id
from samzapy.pipeline.testing import PipelineHarness

MIN = 60_000


def _run(window: object, records: list[tuple[str, dict[str, int]]]) -> list[tuple[int, int, bool, str]]:
    app = samzapy.App("ids")
    app.stream("in", timestamp="ts").window(window, samzapy.count(), emit="update").to("out")
    with PipelineHarness(app) as h:
        h.send_all("in", records)
        h.end_of_stream()
        return [(v["start"], v["value"], v["final"], v["window_id"]) for _, v in h.outputs("out")]


def test_tumbling_updates_carry_the_final_results_window_id() -> None:
    got = _run(samzapy.tumbling(minutes=1), [("k", {"ts": 1}), ("k", {"ts": 2}), ("k", {"ts": MIN})])
    first, second = window_id(b"k", 0, MIN), window_id(b"k", MIN, 2 * MIN)
    assert got == [
        (0, 1, False, first),
        (0, 2, False, first),
        (MIN, 1, False, second),
        (0, 2, True, first),
        (MIN, 1, True, second),
    ]


def test_session_updates_name_the_session_as_it_stands() -> None:
    got = _run(samzapy.session(minutes=30), [("k", {"ts": 0}), ("k", {"ts": 10 * MIN})])
    assert got == [
        (0, 1, False, window_id(b"k", 0, 30 * MIN)),
        (0, 2, False, window_id(b"k", 0, 40 * MIN)),
        (0, 2, True, window_id(b"k", 0, 40 * MIN)),
    ]

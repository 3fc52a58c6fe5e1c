"""Spark replay of the window job's sliding and count windows and update / early emission
gives the streaming run's outputs (by samzapy.id, partition, key and bytes) and stores.

Early results are emitted every ``window.early.fire.ms`` of processing time, which a replay
does not reproduce: they (ids ``...:e:<digest>``) and the early-firing markers in the store
(keys holding ``\\x00ed``) are left out of the comparison, everything else must be equal. The
early-firing case streams half its input first and runs until early results went out, so the
comparison covers a run that fired early.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
from support import create_topic, start_job, wait_for
from test_replay_patterns import diff, replayed, state_dir, stores, streamed

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from jobs_support import job_config, run_to_end  # noqa: E402
from test_jobs_windows import IDLE_PARTITIONS, idle_pipeline  # noqa: E402
from test_spark_restore import store_items  # noqa: E402

from samzapy.config import load_config, parse_job_config  # noqa: E402
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json  # noqa: E402
from samzapy.spark.replay.driver import replay  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 4
CASES = {
    "sliding": {"window.type": "sliding", "window.size.ms": "60000"},
    "count": {"window.type": "count", "window.count.size": "5", "window.count.step": "2"},
    "hopping-update": {"window.type": "hopping", "window.size.ms": "3600000", "window.emit": "update"},
    "session-update-early": {
        "window.type": "session",
        "window.gap.ms": "120000",
        "window.emit": "update",
        "window.early.fire.ms": "50",
    },
}


def run_until_early_results(config: Path, broker: str, topic: str, log: Path) -> None:
    """Run the job on what its input has so far until it has sent an early result, then stop
    it with SIGTERM (it commits; the next run goes on from there)."""
    job = start_job(config, log=log)
    try:
        wait_for(lambda: any(":e:" in o[0] for o in streamed(broker, topic)), 60, what="an early result")
    finally:
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == 0, log.read_text()[-3000:]


def _not_early(outputs: Counter) -> Counter:
    return Counter({o: n for o, n in outputs.items() if ":e:" not in o[0] and ":el:" not in o[0]})


def _without_markers(found: dict) -> dict:
    return {k: [(key, v) for key, v in items if b"\x00ed" not in key] for k, items in found.items()}


def test_replay_of_window_kinds_and_modes_gives_the_streaming_outputs_and_stores(
    tmp_path, broker, spark, capsys
):
    spec = PageViewSpec(count=3_000, users=30, pages=10, seed=61, disorder_ms=200_000, late_fraction=0.02)
    records = [(v["user_id"].encode(), v) for _, v in pageviews(spec)]
    problems: list[str] = []
    sizes = {}
    for case, overrides in CASES.items():
        topics = {n: f"{n}-rw-{case}" for n in ("by-user", "counts", "late")}
        create_topic(broker, topics["by-user"], PARTITIONS)
        early_case = "window.early.fire.ms" in overrides
        half = len(records) // 2 if early_case else len(records)
        produce_json(broker, topics["by-user"], PARTITIONS, records[:half])
        config = job_config(
            tmp_path,
            broker,
            "pageview-counter.properties",
            f"rw-{case}",
            {
                "task.inputs": f"kafka.{topics['by-user']}",
                "window.output.stream": f"kafka.{topics['counts']}",
                "window.late.stream": f"kafka.{topics['late']}",
                "window.allowed.lateness.ms": "300000",
                "watermark.upstream.tasks": "0",
                **overrides,
            },
        )
        if early_case:  # windows stay open until early results went out: the replay must agree anyway
            run_until_early_results(config, broker, topics["counts"], tmp_path / f"{case}.log")
            produce_json(broker, topics["by-user"], PARTITIONS, records[half:])
        produce_end_of_stream(broker, topics["by-user"])
        run_to_end(config)
        out = tmp_path / f"replay-{case}"
        replay(config, output=str(out))
        for topic in (topics["counts"], topics["late"]):
            want, got = _not_early(streamed(broker, topic)), _not_early(replayed(out, topic))
            if topic == topics["counts"]:
                assert sum(want.values()) > 0, f"{case}: the streaming run wrote nothing"
            problems += diff(f"{case} {topic}", want, got)
        want_stores = _without_markers(stores(config, state_dir(config)))
        problems += diff(f"{case} stores", want_stores, _without_markers(stores(config, out / "state")))
        counts, late = streamed(broker, topics["counts"]), streamed(broker, topics["late"])
        early = sum(counts.values()) - sum(_not_early(counts).values())
        sizes[case] = {"outputs": sum(counts.values()), "early": early, "late": sum(late.values())}
    with capsys.disabled():
        print(f"\nwindow replays: {sizes}")
    assert not problems, "\n".join(problems)
    assert sizes["session-update-early"]["early"] > 0  # the comparison covered a run that fired early


def test_replay_takes_the_idle_decisions_of_the_streaming_run(tmp_path, broker, spark):
    counter, topics, want = idle_pipeline(tmp_path, broker, "rw-idle")
    run_to_end(counter)
    out = tmp_path / "replay-idle"
    replay(counter, output=str(out))
    streaming = streamed(broker, topics["counts"])
    assert sum(streaming.values()) == len(want) > 0
    problems = diff("idle counts", streaming, replayed(out, topics["counts"]))
    problems += diff("idle stores", stores_of(counter, state_dir(counter)), stores_of(counter, out / "state"))
    assert not problems, "\n".join(problems)


def stores_of(config: Path, base: Path) -> dict:
    """Every store of ``config`` at ``base``, over the idle pipeline's partitions."""
    names = parse_job_config(load_config(config)).stores
    return {(s, p): store_items(base / s / f"Partition_{p}") for s in names for p in range(IDLE_PARTITIONS)}

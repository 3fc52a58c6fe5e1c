"""The event-time stream-table join (join.time=event) on the real dev broker: the same pairs
for two different interleavings of the same two inputs, exact against an offline as-of
lookup, also after 3 kill -9 rounds."""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support, next to this file

from jobs_support import Feeder, crash_rounds, dedup_by_id, job_config, outputs, run_to_end  # noqa: E402
from support import create_topic  # noqa: E402

from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json, profiles  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 4
PROFILES = list(profiles(600, 50, seed=71))  # updated_at 1 s apart, in order
VIEWS = [
    (v["user_id"].encode(), v)
    for _, v in pageviews(PageViewSpec(count=3_000, users=50, seed=72, span_ms=700_000))
]


def offline_pairs() -> dict[str, str]:
    """view_id -> the zip of its user's latest profile with updated_at <= the view's ts (views
    without one are dropped: inner join)."""
    history: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for _, p in PROFILES:
        history[p["user_id"]].append((p["updated_at"], p["zip"]))
    out = {}
    for _, v in VIEWS:
        valid = [z for t, z in history[v["user_id"]] if t <= v["ts"]]
        if valid:
            out[v["view_id"]] = valid[-1]
    return out


def deployment(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict]:
    topics = {n: f"{n}-{tag}" for n in ("profiles", "views", "enriched")}
    for name in ("profiles", "views"):
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich-event-time.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['views']}",
            "join.table.stream": topics["profiles"],
            f"systems.kafka.streams.{topics['profiles']}.samza.bootstrap": "true",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )
    return config, topics


def produce_profiles(broker: str, topics: dict) -> None:
    produce_json(broker, topics["profiles"], PARTITIONS, PROFILES)
    produce_end_of_stream(broker, topics["profiles"])


def pairs(broker: str, topics: dict) -> dict[str, str]:
    found = {}
    for record in dedup_by_id(outputs(broker, topics["enriched"])).values():
        view = orjson.loads(record.value)
        assert view["view_id"] not in found, f"{view['view_id']} joined twice"
        found[view["view_id"]] = view["zip"]
    return found


def profiles_first(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict]:
    """Interleaving 1: every profile (and their end) before any view; one run."""
    config, topics = deployment(tmp_path, broker, tag)
    produce_profiles(broker, topics)
    produce_json(broker, topics["views"], PARTITIONS, VIEWS)
    run_to_end(config)
    return config, topics


def views_first(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict]:
    """Interleaving 2: every view first (a run: all wait), then the profiles (a second run)."""
    config, topics = deployment(tmp_path, broker, tag)
    produce_json(broker, topics["views"], PARTITIONS, VIEWS)
    run_to_end(config)
    assert outputs(broker, topics["enriched"]) == []
    produce_profiles(broker, topics)
    run_to_end(config)
    return config, topics


def test_event_time_join_gives_the_same_pairs_for_two_interleavings(tmp_path, broker):
    _, first = profiles_first(tmp_path, broker, "etj-a")
    _, second = views_first(tmp_path, broker, "etj-b")
    want = offline_pairs()
    assert len(want) > 2_000
    assert pairs(broker, first) == want
    assert pairs(broker, second) == want


@pytest.mark.crash
def test_event_time_join_is_exact_after_kill9_rounds(tmp_path, broker):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    config, topics = deployment(tmp_path, broker, "etj-crash")
    merged: list[tuple[str, bytes, dict]] = []
    profiles_left, views_left = list(PROFILES), list(VIEWS)
    while profiles_left or views_left:  # a random merge keeping each input's own order
        take_profile = profiles_left and (not views_left or rng.random() < 0.2)
        topic = topics["profiles"] if take_profile else topics["views"]
        merged.append((topic, *(profiles_left if take_profile else views_left).pop(0)))

    def produce(chunk: list[tuple[str, bytes, dict]]) -> None:
        for topic in (topics["profiles"], topics["views"]):
            produce_json(broker, topic, PARTITIONS, [(k, v) for t, k, v in chunk if t == topic])

    feeder = Feeder(
        produce,
        merged,
        chunks=10,
        pause_s=0.8,
        finish=lambda: produce_end_of_stream(broker, topics["profiles"]),
    )
    feeder.start()
    delays = crash_rounds([config], broker, 3, rng, tmp_path / "jobs.log")
    feeder.join_checked()
    run_to_end(config)
    assert pairs(broker, topics) == offline_pairs(), f"seed {seed}, kill delays {delays}"

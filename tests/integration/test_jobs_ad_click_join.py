"""The Photon-style click join on the real dev broker: exact, then across kill -9."""

from __future__ import annotations

import random
import sys
from collections import defaultdict
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
from support import create_topic, header, metric_sum, read_metrics  # noqa: E402

from samzapy.generate import AdSpec, ads, produce_end_of_stream, produce_json  # noqa: E402
from samzapy.jobs.ad_click_join import joined_record  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 4


def expected(spec: AdSpec) -> tuple[dict[str, dict], dict[str, dict]]:
    """(joined record by click id, unjoined click by click id) from the generated records."""
    impressions, clicks = ads(spec)
    by_id = {imp["impression_id"]: imp for _, imp in impressions}
    joined, unjoined = {}, {}
    for _, click in clicks:
        imp = by_id.get(click["impression_id"])
        if imp is None:
            unjoined[click["click_id"]] = click
        else:
            joined[click["click_id"]] = joined_record(click, imp)
    return joined, unjoined


def setup(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict]:
    topics = {name: f"{name}-{tag}" for name in ("impressions", "clicks", "joined", "unjoined")}
    for name in ("impressions", "clicks"):
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "ad-click-join.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['impressions']},kafka.{topics['clicks']}",
            "join.clicks.stream": topics["clicks"],
            "join.impressions.stream": topics["impressions"],
            "join.output.stream": f"kafka.{topics['joined']}",
            "join.unjoined.stream": f"kafka.{topics['unjoined']}",
        },
    )
    return config, topics


def results(broker: str, topics: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    """Joined and unjoined outputs by click id, after dedup by samzapy.id; checks that no
    click was joined (or unjoined) under two ids, i.e. joined twice."""
    found = {}
    for name in ("joined", "unjoined"):
        records = outputs(broker, topics[name])
        unique = dedup_by_id(records)
        ids_per_click = defaultdict(set)
        for record in records:
            ids_per_click[orjson.loads(record.value)["click_id"]].add(header(record, "samzapy.id"))
        assert all(len(ids) == 1 for ids in ids_per_click.values()), "a click was joined twice"
        found[name] = {orjson.loads(r.value)["click_id"]: orjson.loads(r.value) for r in unique.values()}
        assert len(found[name]) == len(unique)
    assert not set(found["joined"]) & set(found["unjoined"]), "a click both joined and unjoined"
    return found["joined"], found["unjoined"]


SPEC = AdSpec(impressions=3_000, click_rate=0.3, duplicate_rate=0.15, orphan_clicks=40, seed=5)


def test_every_click_joined_once_and_orphans_unjoined(tmp_path, broker):
    config, topics = setup(tmp_path, broker, "ad-clean")
    impressions, clicks = ads(SPEC)
    produce_json(broker, topics["impressions"], PARTITIONS, impressions)
    produce_json(broker, topics["clicks"], PARTITIONS, clicks)
    for name in ("impressions", "clicks"):
        produce_end_of_stream(broker, topics[name])
    metrics = tmp_path / "metrics.json"

    run_to_end(config, metrics)

    want_joined, want_unjoined = expected(SPEC)
    joined, unjoined = results(broker, topics)
    assert joined == want_joined
    assert unjoined == want_unjoined
    copies = len(clicks) - len(want_joined) - len(want_unjoined)
    # a copy refused by the registry is counted; one arriving while the first still waits
    # unmatched replaces it in the buffer instead
    assert copies > 0 and metric_sum(read_metrics(metrics), "task.", "duplicate-clicks") <= copies
    assert metric_sum(read_metrics(metrics), "task.", "joined-clicks") == len(want_joined)


@pytest.mark.crash
def test_kill9_neither_loses_nor_doubles_a_join(tmp_path, broker):
    seed = random.randrange(1 << 30)
    spec = AdSpec(impressions=12_000, click_rate=0.3, duplicate_rate=0.15, orphan_clicks=100, seed=6)
    config, topics = setup(tmp_path, broker, "ad-crash")
    impressions, clicks = ads(spec)

    def feed(chunk: list) -> None:
        produce_json(broker, topics[chunk[0]], PARTITIONS, chunk[1])

    chunks = 10
    step_i, step_c = -(-len(impressions) // chunks), -(-len(clicks) // chunks)
    batches = []
    for n in range(chunks):  # both streams advance together, a tenth at a time
        batches.append(("impressions", impressions[n * step_i : (n + 1) * step_i]))
        batches.append(("clicks", clicks[n * step_c : (n + 1) * step_c]))
    feeder = Feeder(
        lambda chunk: [feed(batch) for batch in chunk],
        batches,
        chunks=chunks,
        pause_s=1.0,
        finish=lambda: [produce_end_of_stream(broker, topics[n]) for n in ("impressions", "clicks")],
    )
    feeder.start()

    delays = crash_rounds([config], broker, 3, random.Random(seed), tmp_path / "job.log")
    feeder.join_checked()
    run_to_end(config)

    context = f"seed {seed}, kill delays {delays}"
    want_joined, want_unjoined = expected(spec)
    joined, unjoined = results(broker, topics)
    assert joined == want_joined, context
    assert unjoined == want_unjoined, context
    assert_never_goes_back(committed_store_values(broker, config, "join-state", b"et\x00wm"))

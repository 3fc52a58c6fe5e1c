"""The table-table and stream-table joins on the real dev broker: exact, then across kill -9."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support, next to this file

from jobs_support import Feeder, crash_rounds, dedup_by_id, job_config, outputs, run_to_end  # noqa: E402
from support import create_topic, header  # noqa: E402

from samzapy.generate import PageViewSpec, pageviews, produce_json, profiles, settings  # noqa: E402
from samzapy.kafka.partitioner import partition_for_key  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 4


def with_offsets(records: list) -> dict[tuple[int, int], tuple[bytes, dict | None]]:
    """(partition, offset) -> (key, value) of records produced in order to a fresh topic."""
    counts: Counter = Counter()
    placed = {}
    for key, value in records:
        partition = partition_for_key(key, PARTITIONS)
        placed[(partition, counts[partition])] = (key, value)
        counts[partition] += 1
    return placed


def latest(records: list) -> dict[str, dict | None]:
    table: dict[str, dict | None] = {}
    for key, value in records:
        table[key.decode()] = value
    return table


# ----------------------------------------------------------------- table-table
PROFILES = list(profiles(500, 60, seed=1, delete_fraction=0.1))
SETTINGS = list(settings(500, 60, seed=2, delete_fraction=0.1))


def joined(user: str, profile: dict | None, setting: dict | None) -> dict | None:
    if profile is None or setting is None:
        return None
    return {"user_id": user, "profile": profile, "settings": setting}


def table_setup(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict]:
    topics = {name: f"{name}-{tag}" for name in ("profiles", "settings", "changes", "table")}
    for name in ("profiles", "settings"):
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "profile-settings-join.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['settings']}",
            "join.left.stream": topics["profiles"],
            "join.right.stream": topics["settings"],
            "join.output.stream": f"kafka.{topics['changes']}",
            "stores.joined.changelog": f"kafka.{topics['table']}",
        },
    )
    return config, topics


def check_table_outputs(broker: str, topics: dict) -> None:
    by_offset = {"profiles": with_offsets(PROFILES), "settings": with_offsets(SETTINGS)}
    streams = {topics["profiles"]: "profiles", topics["settings"]: "settings"}
    records = outputs(broker, topics["changes"])
    for rid, record in dedup_by_id(records).items():
        # every change is the join of the versions its id names, caused by an update of its key
        _, stream, partition, offset, left, right = rid.split(":")
        user = record.key.decode()
        partition = int(partition)
        assert partition == record.partition == partition_for_key(record.key, PARTITIONS)
        assert by_offset[streams[stream]][(partition, int(offset))][0] == record.key
        profile = None if left == "-" else by_offset["profiles"][(partition, int(left))][1]
        setting = None if right == "-" else by_offset["settings"][(partition, int(right))][1]
        value = None if record.value is None else orjson.loads(record.value)
        assert value == joined(user, profile, setting), rid
    want = {
        u: joined(u, latest(PROFILES).get(u), latest(SETTINGS).get(u)) for u in latest(PROFILES + SETTINGS)
    }
    last = {r.key.decode(): (None if r.value is None else orjson.loads(r.value)) for r in records}
    assert last == want  # the last change of each user is the joined table
    table = {r.key.decode(): r.value for r in outputs(broker, topics["table"])}
    assert {u: orjson.loads(v) for u, v in table.items() if v is not None} == {
        u: v for u, v in want.items() if v is not None
    }  # and so is the joined store's changelog


def test_table_join_changes_and_table_are_exact(tmp_path, broker):
    config, topics = table_setup(tmp_path, broker, "tt-clean")
    produce_json(broker, topics["profiles"], PARTITIONS, PROFILES)
    produce_json(broker, topics["settings"], PARTITIONS, SETTINGS)

    run_to_end(config)

    check_table_outputs(broker, topics)
    assert len(outputs(broker, topics["changes"])) == len(PROFILES) + len(SETTINGS)


@pytest.mark.crash
def test_table_join_survives_kill9(tmp_path, broker):
    seed = random.randrange(1 << 30)
    config, topics = table_setup(tmp_path, broker, "tt-crash")
    batches = [(topics["profiles"], PROFILES[i : i + 50]) for i in range(0, len(PROFILES), 50)]
    batches += [(topics["settings"], SETTINGS[i : i + 50]) for i in range(0, len(SETTINGS), 50)]
    batches.sort(key=lambda b: random.Random(seed).random())  # noqa: B023 - a fresh order per seed
    feeder = Feeder(
        lambda chunk: [produce_json(broker, t, PARTITIONS, rs) for t, rs in chunk],
        batches,
        chunks=8,
        pause_s=0.8,
        finish=lambda: None,
    )
    feeder.start()

    delays = crash_rounds([config], broker, 3, random.Random(seed), tmp_path / "job.log")
    feeder.join_checked()
    run_to_end(config)

    try:
        check_table_outputs(broker, topics)
    except AssertionError as error:
        raise AssertionError(f"seed {seed}, kill delays {delays}: {error}") from error


# ----------------------------------------------------------------- stream-table
ZIP_PROFILES = list(profiles(300, 50, seed=3, delete_fraction=0.1))
VIEWS = [(v["user_id"].encode(), v) for _, v in pageviews(PageViewSpec(count=6_000, users=60, seed=4))]


def enrich_setup(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict]:
    topics = {name: f"{name}-{tag}" for name in ("profiles", "views", "enriched")}
    create_topic(broker, topics["views"], PARTITIONS)
    produce_json(broker, topics["profiles"], PARTITIONS, ZIP_PROFILES)  # before the job starts
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['views']}",
            "join.table.stream": topics["profiles"],
            f"systems.kafka.streams.{topics['profiles']}.samza.bootstrap": "true",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )
    return config, topics


def check_enriched(broker: str, topics: dict) -> None:
    zips = {u: p["zip"] for u, p in latest(ZIP_PROFILES).items() if p is not None}
    want = {v["view_id"]: {**v, "zip": zips[v["user_id"]]} for _, v in VIEWS if v["user_id"] in zips}
    records = outputs(broker, topics["enriched"])
    unique = dedup_by_id(records)
    got = {orjson.loads(r.value)["view_id"]: orjson.loads(r.value) for r in unique.values()}
    assert got == want
    assert len(got) == len(unique)
    assert all(header(r, "samzapy.id").startswith(b"enrich:") for r in records)
    assert 0 < len(want) < len(VIEWS)  # some users have no profile (inner join)


def test_views_are_enriched_with_the_zip_of_the_bootstrapped_profiles(tmp_path, broker):
    config, topics = enrich_setup(tmp_path, broker, "st-clean")
    produce_json(broker, topics["views"], PARTITIONS, VIEWS)

    run_to_end(config)

    check_enriched(broker, topics)


@pytest.mark.crash
def test_enrichment_survives_kill9(tmp_path, broker):
    seed = random.randrange(1 << 30)
    config, topics = enrich_setup(tmp_path, broker, "st-crash")
    feeder = Feeder(
        lambda chunk: produce_json(broker, topics["views"], PARTITIONS, chunk),
        VIEWS,
        chunks=8,
        pause_s=0.8,
        finish=lambda: None,
    )
    feeder.start()

    delays = crash_rounds([config], broker, 3, random.Random(seed), tmp_path / "job.log")
    feeder.join_checked()
    run_to_end(config)

    try:
        check_enriched(broker, topics)
    except AssertionError as error:
        raise AssertionError(f"seed {seed}, kill delays {delays}: {error}") from error

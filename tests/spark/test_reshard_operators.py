"""Reshard of jobs whose stores hold more than keyed values, on the dev broker: the event-time
join (versions, waiting views, the table's observed time) 4 -> 3 tasks, the page-view counter
(open windows, the tasks' watermarks) 4 -> 6 tasks and a dedup job (ids that belong to no
key) 4 -> 3 tasks, each stopped mid-stream, resharded,
fed the rest of its input and run: exact outputs, nothing replayed, every key's entries in the
task that owns it, and the tasks' own entries combined by their rules."""

from __future__ import annotations

import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from state_support import (
    HALF,
    PROFILES,
    dedup_config,
    enrich_job,
    events,
    recreate,
    restored,
    rows_of,
    timed_views,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from jobs_support import dedup_by_id, job_config, outputs, run_to_end  # noqa: E402
from support import create_topic, read_metrics  # noqa: E402

from samzapy.generate import produce_end_of_stream, produce_json  # noqa: E402
from samzapy.kafka.partitioner import partition_for_key  # noqa: E402
from samzapy.operators.key_encoding import decode_ms  # noqa: E402
from samzapy.spark.state_data.read import read_state  # noqa: E402
from samzapy.spark.state_data.reshard_own import feeders  # noqa: E402
from samzapy.tools.state_storage import main as state_storage_tool  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HOUR = 3_600_000
START = 1_700_000_000_000 - 1_700_000_000_000 % HOUR


def reshard_cli(config: Path, tasks: int) -> str:
    args = ["reshard", "--config-path", str(config), "--partitions", str(tasks)]
    result = CliRunner().invoke(state_storage_tool, args)
    assert result.exit_code == 0, result.output
    return result.output


def keyed_entries(rows: list[dict]) -> list[tuple[str, bytes, bytes]]:
    """(kind, key bytes, value bytes) of the rows that belong to a key, sorted."""
    return sorted((r["kind"], bytes(r["key_bytes"]), bytes(r["value_bytes"])) for r in rows if r["key"])


def run_measured(config: Path, metrics: Path) -> dict:
    run_to_end(config, metrics)
    return read_metrics(metrics)


def test_event_time_join_resharded_4_to_3_mid_stream_joins_exactly(tmp_path, broker, spark):
    tag = f"rsh-etj-{tmp_path.name[-8:]}"
    config, topics = enrich_job(tmp_path, broker, tag)
    all_views = timed_views(400, seed=11)
    produce_json(broker, topics["profiles"], 4, HALF)
    produce_json(broker, topics["views"], 4, all_views)
    run_to_end(config)  # half the table: the later views wait
    before = rows_of(read_state(spark, config, "zip-versions", raw=True))
    observed = {r["partition"]: r["time"] for r in before if r["kind"] == "observed_time"}
    waiting = sum(1 for r in before if r["kind"] == "buffered")
    assert sorted(observed) == [0, 1, 2, 3] and waiting > 50

    for name in ("profiles", "views"):
        recreate(broker, topics[name], 3)
    output = reshard_cli(config, 3)
    assert "-> 3 tasks" in output

    after = rows_of(read_state(spark, config, "zip-versions", raw=True))
    assert sorted(
        (r["kind"], bytes(r["key_bytes"]), bytes(r["value_bytes"])) for r in after if r["key"]
    ) == sorted(
        (r["kind"], bytes(r["key_bytes"]), bytes(r["value_bytes"])) for r in before if r["key"]
    )  # every version and waiting view moved, unchanged
    for row in after:
        if row["key"] is not None:
            assert row["partition"] == partition_for_key(row["key"].encode(), 3), row
    # 4 and 3 are coprime: every new task may hold keys of every old task -> the smallest progress
    assert {r["partition"]: r["time"] for r in after if r["kind"] == "observed_time"} == {
        k: min(observed[j] for j in feeders(k, 4, 3)) for k in range(3)
    }

    produce_json(broker, topics["profiles"], 3, PROFILES[300:])
    produce_end_of_stream(broker, topics["profiles"])
    snapshot = run_measured(config, tmp_path / "after.json")

    assert restored(snapshot, "zip-versions") == 0  # the resharded stores were adopted as they are
    history: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for _, profile in PROFILES:
        history[profile["user_id"]].append((profile["updated_at"], profile["zip"]))
    want = {}  # each view with its user's zip at its time (inner join)
    for _, view in all_views:
        valid = [z for t, z in history[view["user_id"]] if t <= view["ts"]]
        if valid:
            want[view["view_id"]] = valid[-1]
    pairs: dict[str, str] = {}
    for record in dedup_by_id(outputs(broker, topics["enriched"])).values():
        view = orjson.loads(record.value)
        assert view["view_id"] not in pairs, f"{view['view_id']} joined twice"
        pairs[view["view_id"]] = view["zip"]
    assert pairs == want
    assert not any(r["kind"] == "buffered" for r in rows_of(read_state(spark, config, "zip-versions")))


def hour_views(first: int, count: int, hours: int, seed: int) -> list[tuple[bytes, dict]]:
    """Views keyed by user over ``hours`` hours from hour ``first``, in time order."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        user = f"user-{rng.randrange(40):02d}"
        ts = START + first * HOUR + i * hours * HOUR // count
        out.append((user.encode(), {"user_id": user, "ts": ts, "view_id": f"{seed}-{i}"}))
    return out


def watermarks(spark, config: Path) -> dict[tuple[int, bytes], int]:
    """(task, stored key) -> time of the event-time entries of the counter's window store."""
    rows = rows_of(read_state(spark, config, "pageview-counts", raw=True))
    return {
        (r["partition"], bytes(r["key_bytes"])): decode_ms(bytes(r["value_bytes"]))
        for r in rows
        if r["kind"] == "internal" and bytes(r["key_bytes"]).endswith(b"\x00wm")
    }


def test_window_counter_resharded_4_to_6_with_open_windows_counts_exactly(tmp_path, broker, spark):
    tag = f"rsh-pv-{tmp_path.name[-8:]}"
    source, counts, late = f"views-{tag}", f"counts-{tag}", f"late-{tag}"
    create_topic(broker, source, 4)
    config = job_config(
        tmp_path,
        broker,
        "pageview-counter.properties",
        tag,
        {
            "task.inputs": f"kafka.{source}",
            "window.output.stream": f"kafka.{counts}",
            "window.late.stream": f"kafka.{late}",
            "watermark.upstream.tasks": "0",  # the watermark follows the input itself
        },
    )
    first, second = hour_views(0, 1_200, 3, seed=1), hour_views(3, 800, 2, seed=2)
    produce_json(broker, source, 4, first)
    run_to_end(config)  # the last hour's windows stay open
    old = watermarks(spark, config)
    assert {task for task, _ in old} == {0, 1, 2, 3}

    recreate(broker, source, 6)
    reshard_cli(config, 6)

    new = watermarks(spark, config)  # gcd(4, 6) = 2: task k gets the keys of old tasks k % 2, k % 2 + 2
    assert {key for _, key in new} == {key for _, key in old} == {b"et\x00wm", f"et:{source}\x00wm".encode()}
    assert new == {
        (k, key): min(old[(j, key)] for j in feeders(k, 4, 6))
        for k in range(6)
        for key in {key for _, key in old}
    }
    windows = [r for r in rows_of(read_state(spark, config, "pageview-counts")) if r["kind"] == "window"]
    assert windows and all(r["partition"] == partition_for_key(r["key"].encode(), 6) for r in windows)

    produce_json(broker, source, 6, second)
    produce_end_of_stream(broker, source)
    snapshot = run_measured(config, tmp_path / "after.json")

    assert restored(snapshot, "pageview-counts") == 0
    want = Counter((v["user_id"], v["ts"] - v["ts"] % HOUR) for _, v in first + second)
    got: dict[tuple[str, int], int] = {}
    for record in dedup_by_id(outputs(broker, counts)).values():
        message = orjson.loads(record.value)
        window = (message["user_id"], message["window_start"])
        assert window not in got, f"window {window} emitted twice: {got[window]}, {message['count']}"
        got[window] = message["count"]
    assert got == dict(want)
    assert outputs(broker, late) == []


def test_dedup_job_resharded_4_to_3_drops_every_resent_id_once_seen(tmp_path, broker, spark):
    """The deduplicator's ids belong to no key: each new task gets a copy of the ids of every old
    task whose keys it may receive (with 4 and 3 tasks: all of them), so an event re-sent after
    the reshard is dropped in whichever task its key now lands."""
    name = f"rsh-dd-{tmp_path.name[-8:]}"
    first = events(300, resent=40, seed=31)
    produce_json(broker, f"{name}-in", 4, first)
    config = dedup_config(tmp_path, broker, name)
    run_to_end(config)
    old = rows_of(read_state(spark, config, "seen"))
    old_max = {r["partition"]: r["time"] for r in old if r["kind"] == "max_time"}
    ids = {r["key"] for r in old if r["kind"] == "id"}
    assert len(ids) == 300 and sorted(old_max) == [0, 1, 2, 3]

    recreate(broker, f"{name}-in", 3)
    reshard_cli(config, 3)

    new = rows_of(read_state(spark, config, "seen"))
    for task in range(3):
        assert {r["key"] for r in new if r["kind"] == "id" and r["partition"] == task} == ids
    assert {r["partition"]: r["time"] for r in new if r["kind"] == "max_time"} == {
        k: max(old_max.values()) for k in range(3)
    }

    rng = random.Random(32)
    resent = [first[rng.randrange(len(first))] for _ in range(120)]  # same keys, ids and times
    later = events(200, resent=0, seed=33, first=300, start=first[-1][1]["ts"] + 1000)
    produce_json(broker, f"{name}-in", 3, resent + later)
    snapshot = run_measured(config, tmp_path / "after.json")

    assert restored(snapshot, "seen") == 0
    sent = Counter(orjson.loads(r.value)["event_id"] for r in outputs(broker, f"{name}-out"))
    assert sent == Counter({f"e{i}": 1 for i in range(500)})  # every id once, before and after

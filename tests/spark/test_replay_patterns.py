"""Spark replay of every pattern job in ``jobs/`` gives the streaming run's outputs and stores.

For each pattern: generated history is produced to the dev broker, the job runs in streaming
(``samzapy run --exit-at-end``, subprocesses), then the same input history is replayed in
Spark with file output (``--output DIR``: nothing is written to Kafka, so the streaming job's
topics and changelogs stay as they are). Compared: the multiset of
``(samzapy.id, partition, key, value bytes)`` of every output topic, and every store's final
contents, key for key and byte for byte.

Where streaming itself is not deterministic, the history is made so that it is, or the
part the replay cannot reproduce is left out of the comparison (and reported); see
docs/operations.md, "Replay", "What a replay reproduces":

* table-table join: which versions of the two tables meet depends on how a task's two
  inputs interleave, which in streaming is the order its polls return a backlog in. The
  history is produced in phases (a run of the streaming job after each), so streaming reads
  it in production order, which is the order the replay merges it in (record timestamps).
* repartition stage: its ``watermark`` control records are sent from ``window()``, every
  ``task.window.ms`` of wall-clock time in streaming and of record time in the replay, so
  how many there are, and which progress values they carry, differ: they are not compared.
  Its data records (with their lineage headers), ``end-of-stream`` records and stores are;
  so are the window counts of the counter stage downstream, whether it reads the streaming
  or the replayed intermediate topic.

One test function, one Spark session, a few thousand records per pattern.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import consume_all, create_topic, header
from test_spark_restore import store_items

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from jobs_support import job_config, run_to_end  # noqa: E402

from samzapy.config import load_config, parse_job_config  # noqa: E402
from samzapy.generate import (  # noqa: E402
    AdSpec,
    PageViewSpec,
    ads,
    pageviews,
    produce_end_of_stream,
    produce_json,
    profiles,
    settings,
)
from samzapy.operators.event_time import CONTROL_HEADER, LINEAGE_HEADER  # noqa: E402
from samzapy.spark.replay.driver import replay  # noqa: E402
from samzapy.spark.replay.sinks import read_outputs  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 4

Output = tuple[str, int, bytes | None, bytes | None]  # (samzapy.id, partition, key, value)


# ------------------------------------------------------------------ comparing
def streamed(broker: str, topic: str) -> Counter[Output]:
    """What the streaming run wrote to ``topic``."""
    return Counter(
        (header(r, "samzapy.id").decode(), r.partition, r.key, r.value) for r in consume_all(broker, topic)
    )


def replayed(directory: Path, topic: str) -> Counter[Output]:
    """What a file-mode replay into ``directory`` wrote for ``topic``."""
    return Counter(
        (row["id"], row["partition"], row["key"], row["value"])
        for row in read_outputs(directory / "outputs", topic)
    )


def stores(config: Path, base: Path) -> dict[tuple[str, int], list[tuple[bytes, bytes]]]:
    """Every store of the job's config at ``base`` (its ``job.logged.store.base.dir`` layout)."""
    names = parse_job_config(load_config(config)).stores
    return {(s, p): store_items(base / s / f"Partition_{p}") for s in names for p in range(PARTITIONS)}


def state_dir(config: Path) -> Path:
    return Path(load_config(config)["job.logged.store.base.dir"])


def diff(what: str, want: Counter | dict, got: Counter | dict) -> list[str]:
    """A readable difference (empty when equal)."""
    if want == got:
        return []
    if isinstance(want, Counter):
        missing, extra = want - got, got - want
        return [
            f"{what}: {len(missing)} streaming outputs missing from the replay (e.g. "
            f"{list(missing)[:2]}), {len(extra)} extra (e.g. {list(extra)[:2]})"
        ]
    bad = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    return [f"{what}: stores differ at {bad[:6]} (streaming {want.get(bad[0])!r:.300} ...)"]


def compare_job(
    config: Path, out: Path, broker: str, topics: list[str], problems: list[str], tag: str
) -> dict[str, int]:
    """Replay ``config`` into ``out`` and compare outputs of ``topics`` and all stores."""
    stats = replay(config, output=str(out))
    sizes = {}
    for topic in topics:
        want = streamed(broker, topic)
        assert sum(want.values()) > 0, f"{tag}: the streaming run wrote nothing to {topic}"
        problems += diff(f"{tag} {topic}", want, replayed(out, topic))
        sizes[topic] = sum(want.values())
    want_stores = stores(config, state_dir(config))
    assert any(want_stores.values()), f"{tag}: the streaming run left every store empty"
    problems += diff(f"{tag} stores", want_stores, stores(config, out / "state"))
    sizes["store entries"] = sum(len(v) for v in want_stores.values())
    sizes["replayed records"] = stats.records
    return sizes


# ------------------------------------------------------------------ patterns
def window_aggregation(tmp_path: Path, broker: str, problems: list[str]) -> dict[str, Any]:
    """pageview_repartition + pageview_counter (tumbling hour windows, late views aside)."""
    topics = {n: f"{n}-rp" for n in ("pageviews", "by-user", "by-user-replayed", "counts", "late")}
    create_topic(broker, topics["pageviews"], PARTITIONS)
    spec = PageViewSpec(count=3_000, users=40, pages=30, seed=31, disorder_ms=300_000, late_fraction=0.03)
    produce_json(broker, topics["pageviews"], PARTITIONS, pageviews(spec))
    produce_end_of_stream(broker, topics["pageviews"])

    def repartition(tag: str, output: str) -> Path:
        return job_config(
            tmp_path,
            broker,
            "pageview-repartition.properties",
            tag,
            {
                "task.inputs": f"kafka.{topics['pageviews']}",
                "repartition.output.stream": f"kafka.{output}",
                f"systems.kafka.streams.{output}.partitions": str(PARTITIONS),
            },
        )

    def counter(tag: str, source: str) -> Path:
        return job_config(
            tmp_path,
            broker,
            "pageview-counter.properties",
            tag,
            {
                "task.inputs": f"kafka.{source}",
                "window.output.stream": f"kafka.{topics['counts']}",
                "window.late.stream": f"kafka.{topics['late']}",
                "watermark.upstream.tasks": str(PARTITIONS),
            },
        )

    stream_rp, stream_counter = repartition("rp", topics["by-user"]), counter("rp", topics["by-user"])
    run_to_end(stream_rp)
    run_to_end(stream_counter)
    sizes: dict[str, Any] = {}

    # Stage 1, replayed with Kafka output into another deployment (its own intermediate
    # topic and changelog), so that stage 2 can then be replayed over the replay's output.
    replay_rp = repartition("rp-replayed", topics["by-user-replayed"])
    replay(replay_rp)
    rename = {topics["by-user-replayed"]: topics["by-user"]}
    want, got = (
        intermediate(broker, topics["by-user"], {}),
        intermediate(broker, topics["by-user-replayed"], rename),
    )
    for kind in ("data", b"end-of-stream"):
        problems += diff(f"repartition {kind!r} records", want[kind], got[kind])
    sizes["repartition data records"] = sum(want["data"].values())
    sizes["repartition watermark records (streaming / replay)"] = (
        sum(want[b"watermark"].values()),
        sum(got[b"watermark"].values()),
    )
    want_stores = stores(stream_rp, state_dir(stream_rp))
    assert all(want_stores.values()), "the repartition tasks should all have kept their progress"
    problems += diff("repartition stores", want_stores, stores(replay_rp, state_dir(replay_rp)))

    # Stage 2 over the intermediate topic the streaming counter read: everything identical.
    sizes["counter"] = compare_job(
        stream_counter,
        tmp_path / "replay-counter",
        broker,
        [topics["counts"], topics["late"]],
        problems,
        "counter",
    )
    # Stage 2 over the replayed intermediate topic (other watermark records, other offsets):
    # the same windows and counts, the same late views and the same final store. Late views'
    # ids name their input offset, which differs between the two intermediate topics.
    end_to_end = counter("rp-e2e", topics["by-user-replayed"])
    out = tmp_path / "replay-counter-e2e"
    replay(end_to_end, output=str(out))
    problems += diff("end-to-end counts", streamed(broker, topics["counts"]), replayed(out, topics["counts"]))
    problems += diff(
        "end-to-end late views (partition, key, value)",
        Counter(o[1:] for o in streamed(broker, topics["late"]).elements()),
        Counter(o[1:] for o in replayed(out, topics["late"]).elements()),
    )
    problems += diff(
        "end-to-end counter stores",
        stores(stream_counter, state_dir(stream_counter)),
        stores(end_to_end, out / "state"),
    )
    return sizes


def intermediate(broker: str, topic: str, rename: dict[str, str]) -> dict[Any, Counter]:
    """The repartition stage's output by kind: data records as (id, partition, key, value,
    lineage), control records as (id, partition, key, value); ``rename`` maps topic names
    inside control-record ids (they name the output stream)."""
    kinds: dict[Any, Counter] = {"data": Counter(), b"end-of-stream": Counter(), b"watermark": Counter()}
    for r in consume_all(broker, topic):
        rid = header(r, "samzapy.id").decode()
        for old, new in rename.items():
            rid = rid.replace(f":{old}:", f":{new}:")
        control = header(r, CONTROL_HEADER)
        if control is None:
            kinds["data"][(rid, r.partition, r.key, r.value, header(r, LINEAGE_HEADER))] += 1
        else:
            kinds[control][(rid, r.partition, r.key, r.value)] += 1
    return kinds


def table_table(tmp_path: Path, broker: str, problems: list[str]) -> dict[str, Any]:
    """profile_settings_join: the history is produced in four phases, the streaming job run to
    the end after each, so that streaming reads it in production (= record timestamp) order."""
    topics = {n: f"{n}-tt-replay" for n in ("profiles", "settings", "changes", "table")}
    for name in ("profiles", "settings"):
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "profile-settings-join.properties",
        "tt-replay",
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['settings']}",
            "join.left.stream": topics["profiles"],
            "join.right.stream": topics["settings"],
            "join.output.stream": f"kafka.{topics['changes']}",
            "stores.joined.changelog": f"kafka.{topics['table']}",
        },
    )
    left = list(profiles(600, 80, seed=41, delete_fraction=0.1))
    right = list(settings(600, 80, seed=42, delete_fraction=0.1))
    for topic, records in (
        (topics["profiles"], left[:300]),
        (topics["settings"], right[:300]),
        (topics["profiles"], left[300:]),
        (topics["settings"], right[300:]),
    ):
        produce_json(broker, topic, PARTITIONS, records)
        run_to_end(config)
    return compare_job(config, tmp_path / "replay-tt", broker, [topics["changes"]], problems, "table-table")


def stream_table(tmp_path: Path, broker: str, problems: list[str]) -> dict[str, Any]:
    """pageview_enrich: profiles (a bootstrap stream) produced first, then views by user."""
    topics = {n: f"{n}-st-replay" for n in ("profiles", "views", "enriched")}
    create_topic(broker, topics["views"], PARTITIONS)
    produce_json(broker, topics["profiles"], PARTITIONS, profiles(300, 50, seed=43, delete_fraction=0.1))
    views = pageviews(PageViewSpec(count=3_000, users=60, seed=44))
    produce_json(broker, topics["views"], PARTITIONS, ((v["user_id"].encode(), v) for _, v in views))
    # Profile updates produced after the views are part of the bootstrap in both runs: the
    # streaming job reads profiles to the end they had at its start, the replay its whole range.
    produce_json(broker, topics["profiles"], PARTITIONS, profiles(100, 50, seed=45))
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich.properties",
        "st-replay",
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['views']}",
            "join.table.stream": topics["profiles"],
            f"systems.kafka.streams.{topics['profiles']}.samza.bootstrap": "true",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )
    run_to_end(config)
    return compare_job(config, tmp_path / "replay-st", broker, [topics["enriched"]], problems, "stream-table")


def stream_global_table(tmp_path: Path, broker: str, problems: list[str]) -> dict[str, Any]:
    """pageview_enrich_global: profiles fill a global side-input store, then views by user.

    The side-input store has no changelog and is not a replay output (every run rebuilds it
    from its topic), so only the enriched outputs are compared.
    """
    topics = {n: f"{n}-gt-replay" for n in ("profiles", "views", "enriched")}
    create_topic(broker, topics["views"], PARTITIONS)
    produce_json(broker, topics["profiles"], PARTITIONS, profiles(300, 50, seed=53, delete_fraction=0.1))
    views = pageviews(PageViewSpec(count=2_000, users=60, seed=54))
    produce_json(broker, topics["views"], PARTITIONS, ((v["user_id"].encode(), v) for _, v in views))
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich-global.properties",
        "gt-replay",
        {
            "task.inputs": f"kafka.{topics['views']}",
            "stores.user-zips.side.inputs": f"kafka.{topics['profiles']}",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )
    run_to_end(config)
    out = tmp_path / "replay-gt"
    stats = replay(config, output=str(out))
    want = streamed(broker, topics["enriched"])
    assert sum(want.values()) > 0, "global table: the streaming run wrote nothing"
    problems += diff(f"global table {topics['enriched']}", want, replayed(out, topics["enriched"]))
    return {topics["enriched"]: sum(want.values()), "replayed records": stats.records}


def stream_stream(tmp_path: Path, broker: str, problems: list[str]) -> dict[str, Any]:
    """ad_click_join: impressions, then clicks (duplicates, orphans), then end-of-stream."""
    topics = {n: f"{n}-ss-replay" for n in ("impressions", "clicks", "joined", "unjoined")}
    for name in ("impressions", "clicks"):
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "ad-click-join.properties",
        "ss-replay",
        {
            "task.inputs": f"kafka.{topics['impressions']},kafka.{topics['clicks']}",
            "join.clicks.stream": topics["clicks"],
            "join.impressions.stream": topics["impressions"],
            "join.output.stream": f"kafka.{topics['joined']}",
            "join.unjoined.stream": f"kafka.{topics['unjoined']}",
        },
    )
    impressions, clicks = ads(
        AdSpec(impressions=2_000, click_rate=0.3, duplicate_rate=0.15, orphan_clicks=30, seed=46)
    )
    produce_json(broker, topics["impressions"], PARTITIONS, impressions)
    produce_json(broker, topics["clicks"], PARTITIONS, clicks)
    for name in ("impressions", "clicks"):
        produce_end_of_stream(broker, topics[name])
    run_to_end(config)
    return compare_job(
        config,
        tmp_path / "replay-ss",
        broker,
        [topics["joined"], topics["unjoined"]],
        problems,
        "stream-stream",
    )


PATTERNS: dict[str, Callable[[Path, str, list[str]], dict[str, Any]]] = {
    "window aggregation (repartition + counter)": window_aggregation,
    "table-table join": table_table,
    "stream-table join (bootstrap)": stream_table,
    "stream-table join (global side-input table)": stream_global_table,
    "stream-stream join": stream_stream,
}


def test_replay_of_each_pattern_job_gives_the_streaming_outputs_and_stores(tmp_path, broker, spark, capsys):
    problems: list[str] = []
    report = {}
    for name, run in PATTERNS.items():
        found: list[str] = []
        report[name] = run(tmp_path, broker, found)
        problems += [f"{name}: {p}" for p in found]
    with capsys.disabled():
        for name, sizes in report.items():
            print(f"\n{name}: {sizes}")
    assert not problems, "\n".join(problems)

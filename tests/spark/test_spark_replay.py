"""Spark replay against the dev broker: the job's own task over its history gives exactly the
streaming run's outputs (ids and bytes) and stores, and streaming continues from the replay."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest
from support import consume_all, header, metric_sum, read_metrics, run_job, wait_for, write_config
from test_spark_restore import _env, store_items

from samzapy.generate import PageViewSpec, pageviews, produce_json
from samzapy.kafka.admin import TopicAdmin
from samzapy.spark.replay.driver import replay
from samzapy.spark.replay.sinks import read_outputs

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 4


def delete_topic(broker: str, topic: str) -> None:
    with TopicAdmin(broker) as admin:
        if admin.partition_count(topic) is not None:
            admin.delete_topic(topic)
            wait_for(lambda: admin.partition_count(topic) is None, what=f"deletion of {topic}")


def outputs(broker: str, topic: str) -> Counter:
    """(samzapy.id, value bytes) of every record of ``topic``, with multiplicity."""
    return Counter((header(r, "samzapy.id").decode(), r.value) for r in consume_all(broker, topic))


def test_replay_of_the_stateless_example_job_gives_exactly_the_streaming_outputs(tmp_path, broker, spark):
    name = f"replay-filter-{tmp_path.name[-12:]}"
    produce_json(broker, f"{name}-in", PARTITIONS, pageviews(PageViewSpec(count=6_000, seed=5)))
    config = write_config(
        tmp_path / "filter.properties",
        {
            "job.name": name,
            "task.class": "samzapy.jobs.pageview_filter:PageViewFilterTask",
            "task.inputs": f"kafka.{name}-in",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            "systems.kafka.samza.offset.default": "oldest",
            "job.logged.store.base.dir": str(tmp_path / "state"),
        },
    )
    delete_topic(broker, "user-pageviews")
    result = run_job(config, "--exit-at-end", env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    streamed = outputs(broker, "user-pageviews")
    streamed_records = {header(r, "samzapy.id"): r for r in consume_all(broker, "user-pageviews")}
    assert sum(streamed.values()) > 5_000

    files = replay(config, output=str(tmp_path / "replayed"), file_format="avro")
    from_files = Counter(
        (row["id"], row["value"]) for row in read_outputs(tmp_path / "replayed" / "outputs", "user-pageviews")
    )
    assert from_files == streamed
    assert files.records == 6_000

    delete_topic(broker, "user-pageviews")
    replay(config)
    assert outputs(broker, "user-pageviews") == streamed
    for record in consume_all(broker, "user-pageviews"):
        original = streamed_records[header(record, "samzapy.id")]
        assert (record.partition, record.key) == (original.partition, original.key)
    delete_topic(broker, "user-pageviews")


def counting_config(tmp_path: Path, broker: str, name: str, source: str) -> Path:
    return write_config(
        tmp_path / f"{name}.properties",
        {
            "job.name": name,
            "task.class": "spark_tasks:CountingTask",
            "task.inputs": f"kafka.{source}",
            "task.commit.ms": "500",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "json",
            "stores.counts.changelog": f"kafka.{name}-changelog",
            "job.logged.store.base.dir": str(tmp_path / name),
            "app.output": f"kafka.{name}-out",
        },
    )


def stores(tmp_path: Path, name: str) -> dict[int, list]:
    return {p: store_items(tmp_path / name / "counts" / f"Partition_{p}") for p in range(PARTITIONS)}


def changelog_state(broker: str, topic: str) -> dict[int, dict[bytes, bytes]]:
    state: dict[int, dict[bytes, bytes | None]] = {p: {} for p in range(PARTITIONS)}
    for record in consume_all(broker, topic):
        state[record.partition][record.key] = record.value
    return {p: {k: v for k, v in kv.items() if v is not None} for p, kv in state.items()}


def expected_counts(broker: str, topic: str) -> dict[int, dict[bytes, bytes]]:
    counts: dict[int, Counter] = {p: Counter() for p in range(PARTITIONS)}
    for record in consume_all(broker, topic):
        counts[record.partition][orjson.loads(record.value)["user_id"]] += 1
    return {p: {u.encode(): orjson.dumps(n) for u, n in c.items()} for p, c in counts.items()}


def test_replay_of_a_stateful_job_matches_streaming_and_streaming_adopts_its_checkpoint(
    tmp_path, broker, spark
):
    source = f"replay-counts-in-{tmp_path.name[-12:]}"
    streaming, replayed = f"{source}-a", f"{source}-b"
    produce_json(broker, source, PARTITIONS, pageviews(PageViewSpec(count=5_000, users=300, seed=21)))
    config_a = counting_config(tmp_path, broker, streaming, source)
    config_b = counting_config(tmp_path, broker, replayed, source)

    result = run_job(config_a, "--exit-at-end", env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    stats = replay(config_b)

    assert stats.records == 5_000
    assert outputs(broker, f"{replayed}-out") == outputs(broker, f"{streaming}-out")
    assert stores(tmp_path, replayed) == stores(tmp_path, streaming)
    final = stores(tmp_path, replayed)
    assert {p: dict(items) for p, items in final.items()} == changelog_state(broker, f"{replayed}-changelog")

    # More input; the streaming job of the replayed deployment adopts the replay's checkpoint.
    produce_json(broker, source, PARTITIONS, pageviews(PageViewSpec(count=2_000, users=300, seed=22)))
    metrics = tmp_path / "metrics.json"
    result = run_job(config_b, "--exit-at-end", "--metrics-file", str(metrics), env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "task.", "messages-actually-processed") == 2_000
    assert metric_sum(snapshot, "store.counts.", "restored-messages") == 0
    result = run_job(config_a, "--exit-at-end", env=_env())
    assert result.returncode == 0, result.stderr[-3000:]

    assert stores(tmp_path, replayed) == stores(tmp_path, streaming)
    assert {p: dict(items) for p, items in stores(tmp_path, replayed).items()} == expected_counts(
        broker, source
    )
    assert outputs(broker, f"{replayed}-out") == outputs(broker, f"{streaming}-out")
    assert sum(outputs(broker, f"{replayed}-out").values()) == 7_000

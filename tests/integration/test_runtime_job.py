"""The runtime end to end: a stateless job on the real dev broker, in real subprocesses."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from support import (
    consume_all,
    create_topic,
    header,
    kill9,
    loud_lines,
    metric_sum,
    produce,
    read_metrics,
    run_job,
    start_job,
    wait_for,
    write_config,
)

from samzapy.checkpoint import TaskCheckpoint
from samzapy.generate import PageViewSpec, pageviews, produce_json
from samzapy.kafka.partitioner import partition_for_key

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


def filter_config(tmp_path: Path, broker: str, name: str, **extra: str) -> Path:
    props = {
        "job.name": name,
        "task.class": "samzapy.jobs.pageview_filter:PageViewFilterTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "500",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "json",
        f"systems.kafka.streams.{name}-in.samza.offset.default": "oldest",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        **extra,
    }
    return write_config(tmp_path / f"{name}.properties", props)


def expected_outputs(views: list[dict]) -> Counter:
    return Counter(v["view_id"] for v in views if v["page"] != "/page/0")


def outputs_by_view(broker: str) -> tuple[Counter, list]:
    records = consume_all(broker, "user-pageviews")
    return Counter(orjson.loads(r.value)["view_id"] for r in records), records


@pytest.fixture
def fresh_output(broker: str):
    """The example job writes to the fixed topic 'user-pageviews': empty it around each test."""
    from samzapy.kafka.admin import TopicAdmin

    def clear() -> None:
        with TopicAdmin(broker) as admin:
            if admin.partition_count("user-pageviews") is not None:
                admin.delete_topic("user-pageviews")
                wait_for(lambda: admin.partition_count("user-pageviews") is None, what="topic deletion")

    clear()
    yield
    clear()


def test_stateless_job_output_is_exact_and_partitioned_like_kafka(tmp_path, broker, fresh_output):
    name = "filter-exact"
    spec = PageViewSpec(count=10_000, users=200, pages=20, seed=7)
    views = [v for _, v in pageviews(spec)]
    produce_json(broker, f"{name}-in", 4, pageviews(spec))
    config = filter_config(tmp_path, broker, name)

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert loud_lines(result.stderr) == []  # a clean run is quiet
    seen, records = outputs_by_view(broker)
    assert seen == expected_outputs(views)
    by_id = {v["view_id"]: v for v in views}
    for record in records:
        view = orjson.loads(record.value)
        source = by_id[view["view_id"]]
        assert view == {**source, "hour": source["ts"] // HOUR_MS * HOUR_MS}
        assert record.key == source["user_id"].encode()
        assert record.partition == partition_for_key(record.key, 4)
        assert header(record, "samzapy.id") is not None


def test_restart_resumes_from_checkpoint_and_processes_only_new_messages(tmp_path, broker, fresh_output):
    name = "filter-resume"
    first = PageViewSpec(count=10_000, seed=1)
    second = PageViewSpec(count=10_000, seed=2)
    produce_json(broker, f"{name}-in", 4, pageviews(first))
    config = filter_config(tmp_path, broker, name)
    metrics = tmp_path / "metrics.json"

    assert run_job(config, "--exit-at-end", "--metrics-file", str(metrics)).returncode == 0
    assert metric_sum(read_metrics(metrics), "task.", "messages-actually-processed") == 10_000
    produce_json(
        broker,
        f"{name}-in",
        4,
        ((k, {**v, "view_id": "second-" + v["view_id"]}) for k, v in pageviews(second)),
    )
    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert metric_sum(read_metrics(metrics), "task.", "messages-actually-processed") == 10_000
    seen, _ = outputs_by_view(broker)
    expected = expected_outputs([v for _, v in pageviews(first)])
    expected.update(
        expected_outputs([{**v, "view_id": "second-" + v["view_id"]} for _, v in pageviews(second)])
    )
    assert seen == expected  # every message exactly once across the two runs


def checkpoint_history(broker: str, job: str) -> list[TaskCheckpoint]:
    topic = f"__samza_checkpoint_ver_1_for_{job}_1"
    return [TaskCheckpoint.from_bytes(r.value) for r in consume_all(broker, topic) if r.value]


@pytest.mark.crash
def test_kill9_then_restart_loses_nothing_and_checkpoints_never_go_back(tmp_path, broker, fresh_output):
    name = "filter-kill"
    spec = PageViewSpec(count=60_000, seed=3)
    views = [v for _, v in pageviews(spec)]
    produce_json(broker, f"{name}-in", 4, pageviews(spec))
    config = filter_config(tmp_path, broker, name, **{"task.commit.ms": "200"})

    for _ in range(2):
        job = start_job(config, log=tmp_path / "job.log")
        wait_for(lambda: len(checkpoint_history(broker, name)) >= 4, what="first checkpoints")
        time.sleep(0.3)
        kill9(job)
    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    seen, _ = outputs_by_view(broker)
    assert set(seen) == set(expected_outputs(views))  # at least once each
    last: dict[tuple[str, str], int] = {}
    for checkpoint in checkpoint_history(broker, name):
        for ssp, offset in checkpoint.input_offsets.items():
            key = (checkpoint.task_name, str(ssp))
            assert offset >= last.get(key, 0), f"checkpoint of {key} went back"
            last[key] = offset


def test_bootstrap_stream_is_read_to_its_start_end_before_other_inputs(tmp_path, broker):
    name = "bootstrap"
    create_topic(broker, f"{name}-table", 2)
    create_topic(broker, f"{name}-events", 2)
    for p in range(2):
        produce(broker, f"{name}-events", [(b"e", b'{"n": %d}' % i) for i in range(300)], partition=p)
        produce(broker, f"{name}-table", [(b"t", b'{"n": %d}' % i) for i in range(2000)], partition=p)
    config = write_config(
        tmp_path / "bootstrap.properties",
        {
            "job.name": name,
            "task.class": "runtime_tasks:DeliveryOrderTask",
            "task.inputs": f"kafka.{name}-events,kafka.{name}-table",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            f"systems.kafka.streams.{name}-table.samza.bootstrap": "true",
            "systems.kafka.samza.offset.default": "oldest",
            f"systems.kafka.streams.{name}-table.samza.offset.default": "oldest",
            f"systems.kafka.streams.{name}-events.samza.offset.default": "oldest",
            "job.logged.store.base.dir": str(tmp_path / "state"),
        },
    )

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    records = consume_all(broker, "delivery-order")
    for p in range(2):
        mine = [orjson.loads(r.value) for r in records if r.partition == p]
        mine.sort(key=lambda d: d["seq"])
        streams = [d["stream"] for d in mine]
        assert streams.count(f"{name}-table") == 2000 and streams.count(f"{name}-events") == 300
        first_event = streams.index(f"{name}-events")
        assert all(s == f"{name}-table" for s in streams[:first_event])
        assert first_event == 2000


def poison_config(tmp_path: Path, broker: str, name: str, **extra: str) -> Path:
    return filter_config(tmp_path, broker, name, **extra)


def produce_with_poison(broker: str, topic: str) -> int:
    """1,000 good views on partition 1, a non-JSON value at offset 500; returns its offset."""
    create_topic(broker, topic, 2)
    views = [v for _, v in pageviews(PageViewSpec(count=1000, seed=9, pages=5))]
    values = [orjson.dumps({**v, "page": "/page/1"}) for v in views]
    values.insert(500, b"{not json")
    produce(broker, topic, [(b"k", v) for v in values], partition=1)
    return 500


def test_poison_message_stops_the_job_naming_stream_partition_offset(tmp_path, broker, fresh_output):
    name = "poison-stop"
    offset = produce_with_poison(broker, f"{name}-in")
    config = poison_config(tmp_path, broker, name)

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 1
    assert f"stream 'kafka.{name}-in' partition 1 offset {offset}" in result.stderr
    assert "could not deserialise" in result.stderr
    seen, _ = outputs_by_view(broker)
    assert len(seen) == 500  # everything before it, nothing after it
    [checkpoint] = [c for c in checkpoint_history(broker, name) if c.task_name == "Partition 1"][-1:]
    assert {str(k): v for k, v in checkpoint.input_offsets.items()}[f"kafka.{name}-in.1"] == offset


def test_poison_message_goes_to_the_dead_letter_stream_and_the_job_goes_on(tmp_path, broker, fresh_output):
    name = "poison-dlq"
    offset = produce_with_poison(broker, f"{name}-in")
    config = poison_config(tmp_path, broker, name, **{"task.dead.letter.stream": f"kafka.{name}-dlq"})

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    seen, _ = outputs_by_view(broker)
    assert len(seen) == 1000
    [dead] = consume_all(broker, f"{name}-dlq")
    assert dead.value == b"{not json"
    assert header(dead, "samzapy.source") == f"kafka.{name}-in/1/{offset}".encode()
    assert b"could not deserialise" in header(dead, "samzapy.error")


def test_sigterm_commits_so_a_restart_processes_nothing_twice(tmp_path, broker, fresh_output):
    name = "sigterm"
    produce_json(broker, f"{name}-in", 2, pageviews(PageViewSpec(count=5000, seed=11)))
    config = filter_config(tmp_path, broker, name, **{"task.commit.ms": "600000"})
    metrics = tmp_path / "metrics.json"
    job = start_job(config, "--metrics-file", str(metrics), log=tmp_path / "job.log")
    try:
        wait_for(
            lambda: (
                metrics.exists()
                and metric_sum(read_metrics(metrics), "task.", "messages-actually-processed") == 5000
            ),
            what="all 5000 messages processed",
            timeout=120,
        )
    finally:
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == 0

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert metric_sum(read_metrics(metrics), "task.", "messages-actually-processed") == 0
    assert json.loads(metrics.read_text())  # the snapshot is valid JSON

"""Async tasks end to end (issue 7 part 1): per-key order, retries, timeouts, dead letters and
exact stores across SIGKILLs; backpressure keeps queues bounded.

Real dev broker, RocksDB stores, job subprocesses killed with SIGKILL.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from rocksdict import AccessType, Options, Rdict
from support import (
    TESTS_DIR,
    consume_all,
    create_topic,
    header,
    kill9,
    metric_sum,
    produce,
    read_metrics,
    run_job,
    start_job,
    write_config,
)

from samzapy.checkpoint import read_checkpoints
from samzapy.config import Config, parse_job_config

sys.path.insert(0, str(TESTS_DIR / "integration"))  # the task module the jobs run
from async_tasks import FAIL_FIRST, TIME_OUT_FIRST, bucket  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 4


def async_properties(tmp_path: Path, broker: str, name: str, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "task.class": "async_tasks:SequenceTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "500",
        "task.max.concurrency": "8",
        "task.async.queue.size": "400",
        "task.callback.timeout.ms": "100",
        "task.retry.max.attempts": "2",
        "task.retry.backoff.ms": "1",
        "task.dead.letter.stream": f"kafka.{name}-dlq",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "json",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.state.factory": "rocksdb",
        "stores.state.changelog": f"kafka.{name}-state-changelog",
        "stores.state.key.serde": "string",
        "stores.state.msg.serde": "json",
        "stores.state.object.cache.size": "300",
        "stores.state.write.batch.size": "100",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        **extra,
    }


def produce_sequences(broker: str, topic: str, count: int, keys: int, seed: int) -> list[tuple[str, dict]]:
    """``count`` messages ``{"seq": n}`` numbered per key, ~0.2% of them poison."""
    rng = random.Random(seed)
    create_topic(broker, topic, PARTITIONS)
    next_seq: Counter = Counter()
    messages = []
    for _ in range(count):
        key = f"key-{rng.randrange(keys)}"
        message = {"seq": next_seq[key]}
        next_seq[key] += 1
        if rng.random() < 0.002:
            message["poison"] = True
        messages.append((key, message))
    produce(broker, topic, ((k.encode(), json.dumps(m).encode()) for k, m in messages))
    return messages


def expected_state(messages: list[tuple[str, dict]]) -> dict[str, dict]:
    state: dict[str, dict] = {}
    for key, message in messages:
        if message.get("poison"):
            continue
        state[key] = {"last": message["seq"], "count": state.get(key, {"count": 0})["count"] + 1}
    return state


def read_state(tmp_path: Path) -> dict[str, dict]:
    entries = {}
    for part in sorted((tmp_path / "state" / "state").glob("Partition_*")):
        if part.suffix:
            continue
        db = Rdict(str(part), options=Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            entries.update({k.decode(): json.loads(v) for k, v in db.items()})
        finally:
            db.close()
    return entries


def dead_letter_sources(broker: str, topic: str) -> list[str]:
    return [header(r, "samzapy.source").decode() for r in consume_all(broker, topic)]


def poison_sources(broker: str, name: str) -> set[str]:
    return {
        f"kafka.{name}-in/{r.partition}/{r.offset}"
        for r in consume_all(broker, f"{name}-in")
        if json.loads(r.value).get("poison")
    }


def test_async_job_counts_retries_timeouts_and_dead_letters_exactly(tmp_path, broker):
    name = "async-metrics"
    messages = produce_sequences(broker, f"{name}-in", 5_000, 100, seed=4)
    config = write_config(tmp_path / "a.properties", async_properties(tmp_path, broker, name))
    metrics = tmp_path / "metrics.json"

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_state(tmp_path) == expected_state(messages)
    records = consume_all(broker, f"{name}-in")
    poison = [r for r in records if json.loads(r.value).get("poison")]
    healthy = [r for r in records if not json.loads(r.value).get("poison")]
    timing_out = sum(1 for r in healthy if bucket(r.partition, r.offset) < TIME_OUT_FIRST)
    failing = sum(1 for r in healthy if TIME_OUT_FIRST <= bucket(r.partition, r.offset) < FAIL_FIRST)
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "task.", "dead-lettered") == len(poison) > 0
    assert metric_sum(snapshot, "task.", "timeouts") == timing_out > 0
    assert metric_sum(snapshot, "task.", "retries") == timing_out + failing + 2 * len(poison)
    assert metric_sum(snapshot, "task.", "messages-actually-processed") == len(healthy)
    assert metric_sum(snapshot, "task.", "in-flight") == 0
    assert 0 < max(g.get("max-queue-length", 0) for g in snapshot.values()) <= 400
    assert sorted(dead_letter_sources(broker, f"{name}-dlq")) == sorted(poison_sources(broker, name))


@pytest.mark.crash
def test_async_job_is_exact_and_ordered_after_repeated_kill9(tmp_path, broker):
    name = "async-kill"
    messages = produce_sequences(broker, f"{name}-in", 50_000, 200, seed=7)
    props = async_properties(tmp_path, broker, name)
    config = write_config(tmp_path / "a.properties", props)
    rng = random.Random(11)
    for attempt in range(3):
        job = start_job(config, log=tmp_path / "job.log")
        time.sleep(rng.uniform(2.5, 4.5))
        kill9(job)
        assert job.returncode == -9, f"attempt {attempt}: the job ended before it was killed"
    metrics = tmp_path / "metrics.json"

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    state = read_state(tmp_path)
    assert "__violations__" not in state  # per-key order kept, also across restarts
    assert state == expected_state(messages)  # every message exactly once in the state
    # no offset gap: the checkpoint is at the end of every partition
    job = parse_job_config(Config.from_dict(props))
    checkpoints = read_checkpoints(broker, job.checkpoint_topic)
    ends = Counter(f"kafka.{name}-in.{r.partition}" for r in consume_all(broker, f"{name}-in"))
    committed = {str(s): o for c in checkpoints.values() for s, o in c.input_offsets.items()}
    assert committed == dict(ends)
    # every poison message is in the dead-letter stream (re-sent ones after a crash, too)
    assert set(dead_letter_sources(broker, f"{name}-dlq")) == poison_sources(broker, name)
    assert metric_sum(read_metrics(metrics), "task.", "in-flight") == 0


def test_backpressure_keeps_the_queue_bounded(tmp_path, broker):
    name = "async-slow"
    create_topic(broker, f"{name}-in", 1)
    produce(broker, f"{name}-in", ((f"k{i % 37}".encode(), b"x") for i in range(3000)))
    props = {
        "job.name": name,
        "task.class": "async_tasks:SlowTask",
        "task.inputs": f"kafka.{name}-in",
        "task.max.concurrency": "4",
        "task.async.queue.size": "50",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.offset.default": "oldest",
    }
    config = write_config(tmp_path / "s.properties", props)
    metrics = tmp_path / "metrics.json"

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    task = read_metrics(metrics)["task.Partition 0"]
    assert task["messages-actually-processed"] == 3000
    assert task["max-queue-length"] == 50  # it filled up, and never went beyond
    assert task["in-flight"] == 0

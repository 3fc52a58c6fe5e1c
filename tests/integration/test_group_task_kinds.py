"""Group mode runs what it used to refuse (issue 27): an async task, a side-input store and a
``flush.at.head`` store each keep exact state when a member is killed with SIGKILL while
input flows and the other member takes its tasks over.

Real dev broker, RocksDB stores, member subprocesses.
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from group_support import KeyedProducer, checkpointed_total, member_config, running_tasks
from support import (
    changelog_counts,
    create_topic,
    kill9,
    metric_sum,
    produce,
    read_metrics,
    start_job,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.crash]

TASKS = 4
KEYS = 60


def weight(key: str) -> int:
    return 1 + int(key.split("-")[1]) % 3


def processed(metrics: Path) -> int:
    try:
        return metric_sum(read_metrics(metrics), "task.", "messages-actually-processed")
    except (OSError, ValueError):
        return 0


def kill_one_member(tmp_path: Path, broker: str, name: str, **extra: str) -> tuple[Counter, dict[str, int]]:
    """Members a and b share the tasks under load; b is killed with SIGKILL once it has
    processed messages; a takes its tasks, processes everything and stops. The input sent and
    the final counts (the changelog's last value per key)."""
    create_topic(broker, f"{name}-in", TASKS)
    members: dict[str, subprocess.Popen] = {}
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    producer = KeyedProducer(broker, f"{name}-in", keys=KEYS, rate=1000, seed=11)
    try:
        for m in "ab":
            config = member_config(tmp_path, broker, name, m, **extra)
            metrics = str(tmp_path / f"{m}.json")
            members[m] = start_job(config, "--metrics-file", metrics, log=logs[m])
        wait_for(
            lambda: running_tasks(logs["b"]) and processed(tmp_path / "b.json") > 0, 90, what="b to process"
        )
        kill9(members["b"])
        wait_for(lambda: running_tasks(logs["a"]) == list(range(TASKS)), 90, what="a to take b's tasks")
        sent = producer.stop()
        checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"
        total = sum(sent.values())
        wait_for(lambda: checkpointed_total(broker, checkpoints) == total, 120, what="a to process all")
        members["a"].send_signal(signal.SIGTERM)
        assert members["a"].wait(timeout=60) == 0, logs["a"].read_text()[-3000:]
    finally:
        producer.stop() if not producer._stop.is_set() else None
        for process in members.values():
            kill9(process)
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    return sent, counts


def test_an_async_task_survives_kill_9_of_a_member_with_exact_counts(tmp_path, broker):
    sent, counts = kill_one_member(
        tmp_path,
        broker,
        "gk-async",
        **{"task.class": "async_tasks:AsyncCountingTask", "task.max.concurrency": "4"},
    )
    assert counts == dict(sent)


def test_a_side_input_store_survives_kill_9_of_a_member_with_exact_counts(tmp_path, broker):
    name = "gk-side"
    create_topic(broker, f"{name}-weights", TASKS)
    keys = [f"key-{k}" for k in range(KEYS)]
    produce(broker, f"{name}-weights", [(k.encode(), weight(k).to_bytes(8, "big")) for k in keys])
    sent, counts = kill_one_member(
        tmp_path,
        broker,
        name,
        **{
            "task.class": "stateful_tasks:WeightedCountingTask",
            "stores.weights.factory": "rocksdb",
            "stores.weights.key.serde": "string",
            "stores.weights.msg.serde": "long",
            "stores.weights.side.inputs": f"kafka.{name}-weights",
            f"systems.kafka.streams.{name}-weights.samza.msg.serde": "long",
        },
    )
    assert counts == {k: n * weight(k) for k, n in sent.items()}


def test_a_flush_at_head_store_survives_kill_9_of_a_member_with_exact_counts(tmp_path, broker):
    sent, counts = kill_one_member(tmp_path, broker, "gk-head", **{"stores.counts.flush.at.head": "true"})
    assert counts == dict(sent)

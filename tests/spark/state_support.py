"""Helpers of the state-as-data tests: a counting job keyed by user, its inputs and its state."""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from pathlib import Path

import orjson
from support import consume_all, metric_sum, read_metrics, run_job, write_config

from samzapy.generate import produce_json

PARTITIONS = 4


def views(count: int, users: int, seed: int) -> list[tuple[bytes, dict]]:
    """Page views keyed by user (so that each user's count lives in one task)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        user = f"user-{rng.randrange(users):03d}"
        out.append((user.encode(), {"user_id": user, "view_id": f"{seed}-{i}"}))
    return out


def produce_views(broker: str, topic: str, partitions: int, records: list[tuple[bytes, dict]]) -> Counter:
    """Produce the views; their count per user."""
    produce_json(broker, topic, partitions, records)
    return Counter(view["user_id"] for _, view in records)


def counting_config(tmp_path: Path, broker: str, name: str, source: str, **extra: str) -> Path:
    """A job of ``spark_tasks:CountingTask`` (store ``counts``: string -> JSON count)."""
    return write_config(
        tmp_path / f"{name}.properties",
        {
            "job.name": name,
            "task.class": "spark_tasks:CountingTask",
            "task.inputs": f"kafka.{source}",
            "task.commit.ms": "500",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.producer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "json",
            "stores.counts.changelog": f"kafka.{name}-changelog",
            "job.logged.store.base.dir": str(tmp_path / name),
            "app.output": f"kafka.{name}-out",
            **extra,
        },
    )


def run_counting(config: Path, metrics: Path) -> dict:
    """Run the job to the end of its input; its metrics snapshot."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return read_metrics(metrics)


def restored(snapshot: dict, store: str = "counts") -> int:
    """Changelog records the job replayed at start into ``store``."""
    return metric_sum(snapshot, f"store.{store}.", "restored-messages")


def changelog_state(broker: str, topic: str) -> dict[int, dict[str, int]]:
    """Per changelog partition, the last value per key (tombstones applied), decoded."""
    state: dict[int, dict[bytes, bytes | None]] = {}
    for record in consume_all(broker, topic):
        state.setdefault(record.partition, {})[record.key] = record.value
    return {
        p: {k.decode(): orjson.loads(v) for k, v in kv.items() if v is not None} for p, kv in state.items()
    }


def last_counts(broker: str, topic: str) -> dict[str, int]:
    """The last count the job sent per user (its output)."""
    last: dict[str, int] = {}
    for record in consume_all(broker, topic):
        message = orjson.loads(record.value)
        last[message["user_id"]] = max(last.get(message["user_id"], 0), message["count"])
    return last

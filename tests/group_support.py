"""Helpers of the group-mode tests (issue 15): member configs, keyed input, what members log."""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from pathlib import Path

from support import consume_all, metric_sum, produce, read_metrics, write_config

from samzapy.checkpoint import TaskCheckpoint, read_checkpoints

PARTITIONS = 8


def properties(broker: str, name: str, state: Path, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "job.coordinator.factory": "group",
        "job.coordinator.session.timeout.ms": "6000",
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "500",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "job.logged.store.base.dir": str(state),
        **extra,
    }


def produce_keyed(broker: str, topic: str, count: int, keys: int, seed: int) -> Counter:
    rng = random.Random(seed)
    keyed = [f"key-{rng.randrange(keys)}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


def member_config(tmp_path: Path, broker: str, name: str, member: str, **extra: str) -> Path:
    props = properties(broker, name, tmp_path / f"state-{member}", **extra)
    return write_config(tmp_path / f"{member}.properties", props)


def running_tasks(log: Path) -> list[int]:
    """The tasks a member's log last said it runs."""
    found = re.findall(r"running tasks (\[[^\]]*\]|none)", log.read_text(errors="replace"))
    return [] if not found or found[-1] == "none" else [int(t) for t in found[-1][1:-1].split(",")]


class KeyedProducer:
    """Produces keyed messages in the background at about ``rate`` per second, counting keys."""

    def __init__(self, broker: str, topic: str, keys: int, rate: int, seed: int) -> None:
        from samzapy.kafka.producer import Producer

        self.sent: Counter = Counter()
        self._producer = Producer(broker)
        self._topic, self._keys, self._rate = topic, keys, rate
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for _ in range(self._rate // 10):
                key = f"key-{self._rng.randrange(self._keys)}"
                self._producer.send(self._topic, key.encode(), f"m{i}".encode())
                self.sent[key] += 1
                i += 1
            self._producer.flush()
            time.sleep(0.1)

    def stop(self) -> Counter:
        self._stop.set()
        self._thread.join()
        self._producer.close()
        return self.sent


class MetricsSampler:
    """Samples a member's metrics file: (is a container gauge set?, messages its tasks processed)."""

    def __init__(self, path: Path, gauge: str = "rebalance-in-progress") -> None:
        self.samples: list[tuple[bool, int]] = []
        self._path = path
        self._gauge = gauge
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                snapshot = read_metrics(self._path)
            except (OSError, ValueError):
                snapshot = None
            if snapshot is not None:
                rebalancing = bool(snapshot.get("container", {}).get(self._gauge))
                processed = metric_sum(snapshot, "task.", "messages-actually-processed")
                self.samples.append((rebalancing, processed))
            time.sleep(0.2)

    def processed_while_set(self) -> int:
        """Messages processed between two samples that both saw the gauge set (stops sampling)."""
        self._stop.set()
        self._thread.join()
        pairs = zip(self.samples, self.samples[1:], strict=False)
        return sum(b[1] - a[1] for a, b in pairs if a[0] and b[0])


def claimants_by_generation(broker: str, topic: str) -> dict[tuple[str, int], set[str]]:
    found: dict[tuple[str, int], set[str]] = {}
    for record in consume_all(broker, topic):
        if record.value is None:
            continue
        checkpoint = TaskCheckpoint.from_bytes(record.value)
        found.setdefault((checkpoint.task_name, checkpoint.generation), set()).add(checkpoint.claimant)
    return found


def generations_seen(log: Path) -> set[int]:
    return {int(g) for g in re.findall(r"generation (\d+): running tasks", log.read_text(errors="replace"))}


def checkpointed_total(broker: str, topic: str) -> int:
    """Input messages the newest checkpoints of every task account for."""
    found = read_checkpoints(broker, topic)
    return sum(o for c in found.values() for o in c.input_offsets.values())

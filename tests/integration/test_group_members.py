"""Group mode (issue 15): members of one consumer group share the tasks and move them on join,
leave and crash, with their state exact.

Real dev broker, RocksDB stores, member subprocesses (SIGKILL, SIGTERM, SIGSTOP).
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from support import (
    changelog_counts,
    consume_all,
    create_topic,
    kill9,
    metric_sum,
    produce,
    read_metrics,
    start_job,
    wait_for,
    write_config,
)

from samzapy.checkpoint import TaskCheckpoint, read_checkpoints

pytestmark = pytest.mark.integration

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


def test_two_members_share_the_tasks_and_count_exactly(tmp_path, broker):
    name = "group-two"
    create_topic(broker, f"{name}-in", PARTITIONS)
    expected = produce_keyed(broker, f"{name}-in", 20_000, 500, seed=1)
    configs = [member_config(tmp_path, broker, name, m) for m in ("a", "b")]
    logs = [tmp_path / f"{m}.log" for m in ("a", "b")]
    members = [start_job(c, "--exit-at-end", log=log) for c, log in zip(configs, logs, strict=True)]
    try:
        codes = [m.wait(timeout=180) for m in members]
    finally:
        for m in members:
            if m.poll() is None:
                kill9(m)
    assert codes == [0, 0], logs[0].read_text()[-3000:] + logs[1].read_text()[-3000:]
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)


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
    """Samples a member's metrics file: (in a rebalance?, messages its tasks processed)."""

    def __init__(self, path: Path) -> None:
        self.samples: list[tuple[bool, int]] = []
        self._path = path
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
                rebalancing = bool(snapshot.get("container", {}).get("rebalance-in-progress"))
                processed = metric_sum(snapshot, "task.", "messages-actually-processed")
                self.samples.append((rebalancing, processed))
            time.sleep(0.2)

    def processed_during_rebalances(self) -> int:
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


def test_members_crash_join_and_leave_under_load_and_counts_stay_exact(tmp_path, broker):
    name = "group-three"
    topic = f"{name}-in"
    create_topic(broker, topic, PARTITIONS)
    checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"
    members: dict[str, subprocess.Popen] = {}
    logs = {m: tmp_path / f"{m}.log" for m in "abcd"}

    def start(member: str) -> None:
        config = member_config(tmp_path, broker, name, member)
        metrics = str(tmp_path / f"{member}.json")
        members[member] = start_job(config, "--metrics-file", metrics, log=logs[member])

    def cover(names: str) -> bool:
        held = [running_tasks(logs[m]) for m in names]
        return sorted(t for tasks in held for t in tasks) == list(range(PARTITIONS))

    producer = KeyedProducer(broker, topic, keys=300, rate=2000, seed=7)
    try:
        for member in "abc":
            start(member)
        wait_for(lambda: cover("abc") and all(running_tasks(logs[m]) for m in "abc"), 90, what="a, b, c")
        sampler = MetricsSampler(tmp_path / "a.json")
        kill9(members["b"])
        wait_for(lambda: cover("ac"), 90, what="a and c to take b's tasks after its kill -9")
        start("d")
        wait_for(lambda: cover("acd") and running_tasks(logs["d"]), 90, what="d to take its share")
        members["c"].send_signal(signal.SIGTERM)
        assert members["c"].wait(timeout=60) == 0
        wait_for(lambda: cover("ad"), 90, what="a and d to take c's tasks after its SIGTERM")
        expected = producer.stop()
        total = sum(expected.values())

        def caught_up() -> bool:
            found = read_checkpoints(broker, checkpoint_topic)
            return sum(o for c in found.values() for o in c.input_offsets.values()) == total

        wait_for(caught_up, 120, what="a and d to process every message")
        for member in "ad":
            members[member].send_signal(signal.SIGTERM)
        assert [members[m].wait(timeout=60) for m in "ad"] == [0, 0]
    finally:
        producer.stop() if not producer._stop.is_set() else None
        for process in members.values():
            if process.poll() is None:
                kill9(process)

    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)
    doubled = {k: v for k, v in claimants_by_generation(broker, checkpoint_topic).items() if len(v) > 1}
    assert doubled == {}  # never two members committing one task in one generation
    during = sampler.processed_during_rebalances()
    print(f"member a processed {during} messages while rebalances were in progress")
    assert during > 0


def generations_seen(log: Path) -> set[int]:
    return {int(g) for g in re.findall(r"generation (\d+): running tasks", log.read_text(errors="replace"))}


def test_a_static_member_restarted_within_the_session_gets_its_tasks_back(tmp_path, broker):
    name = "group-static"
    create_topic(broker, f"{name}-in", PARTITIONS)
    expected = produce_keyed(broker, f"{name}-in", 4_000, 200, seed=3)
    extra = {"job.coordinator.session.timeout.ms": "30000"}
    configs = {m: member_config(tmp_path, broker, name, m, **extra) for m in "ab"}
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    members = {m: start_job(configs[m], "--instance-id", f"member-{m}", log=logs[m]) for m in "ab"}
    try:
        wait_for(lambda: all(running_tasks(logs[m]) for m in "ab"), 90, what="a and b to run their tasks")
        before = {m: running_tasks(logs[m]) for m in "ab"}
        generations_of_a = generations_seen(logs["a"])
        kill9(members["b"])
        restarted = tmp_path / "b-again.log"
        members["b"] = start_job(configs["b"], "--instance-id", "member-b", log=restarted)
        wait_for(lambda: running_tasks(restarted), 60, what="b to run tasks again")
        time.sleep(3)  # a rebalance, had there been one, would reach a now
        assert running_tasks(restarted) == before["b"]
        assert running_tasks(logs["a"]) == before["a"]
        assert generations_seen(logs["a"]) == generations_of_a  # nobody else rebalanced
        more = produce_keyed(broker, f"{name}-in", 4_000, 200, seed=4)
        expected += more
        checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"

        def caught_up() -> bool:
            found = read_checkpoints(broker, checkpoint_topic)
            return sum(o for c in found.values() for o in c.input_offsets.values()) == 8_000

        wait_for(caught_up, 60, what="both members to process everything")
    finally:
        for process in members.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in members.values():
            if process.wait(timeout=60) is None:
                kill9(process)
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)

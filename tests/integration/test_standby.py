"""Standby replicas (issue 7): a container keeps warm copies of another container's stores by
tailing their changelogs, so that a failover replays no changelog; the standby never writes.

Real dev broker, RocksDB stores, job subprocesses (SIGKILL of the failed container).
"""

from __future__ import annotations

import random
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest
from support import (
    consume_all,
    create_topic,
    kill9,
    metric_sum,
    produce,
    read_counts,
    read_metrics,
    run_job,
    start_job,
    wait_for,
    write_config,
)

from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoints
from samzapy.config import StoreConfig, load_config, parse_job_config
from samzapy.container.standby import StandbyReplicas
from samzapy.container.standby_store import StandbyStore
from samzapy.health import ContainerStatus
from samzapy.kafka.producer import Producer
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.streams import SystemStream

pytestmark = pytest.mark.integration

PARTITIONS = 4
MOVED = (1, 3)  # the tasks of container 1, the one that fails
STAYED = (0, 2)


def properties(name: str, broker: str, state: Path, containers: int, factor: int) -> dict[str, str]:
    return {
        "job.name": name,
        "job.container.count": str(containers),
        "job.standbytasks.replication.factor": str(factor),
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "300",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.object.cache.size": "0",  # every count to the changelog: a long changelog
        "stores.counts.changelog.coalesce": "false",  # (not one record per key per commit)
        "job.logged.store.base.dir": str(state),
    }


def produce_keyed(broker: str, topic: str, count: int, seed: int) -> Counter:
    rng = random.Random(seed)
    keyed = [f"key-{rng.randrange(400)}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


class Job:
    """The topics of the test job, read back."""

    def __init__(self, broker: str, name: str) -> None:
        self.broker = broker
        self.input = f"{name}-in"
        self.changelog = f"{name}-counts-changelog"
        self.checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"

    def processed(self, partitions: tuple[int, ...]) -> bool:
        """Whether the tasks of ``partitions`` have committed every input record."""
        ends = Counter(r.partition for r in consume_all(self.broker, self.input))
        found = read_checkpoints(self.broker, self.checkpoints)
        return all(
            f"Partition {p}" in found and sum(found[f"Partition {p}"].input_offsets.values()) == ends[p]
            for p in partitions
        )

    def committed(self, partition: int) -> int:
        """The changelog offset the task's newest checkpoint holds for the store."""
        return read_checkpoints(self.broker, self.checkpoints)[f"Partition {partition}"].changelog_offsets[
            "counts"
        ]

    def changelog_records(self, partitions: tuple[int, ...]) -> int:
        return sum(1 for r in consume_all(self.broker, self.changelog) if r.partition in partitions)

    def checkpoint_records(self, partitions: tuple[int, ...]) -> int:
        names = {f"Partition {p}".encode() for p in partitions}
        # keyed <task>#<generation>#<claimant> (issue 28), or by task name before
        return sum(1 for r in consume_all(self.broker, self.checkpoints) if r.key.split(b"#")[0] in names)


def standby_caught_up(job: Job, metrics: Path, partitions: tuple[int, ...]) -> bool:
    """Whether the standbys of ``partitions`` (metrics of their container) have a local
    checkpoint at the owner's newest committed changelog offset."""
    if not metrics.exists():
        return False
    snapshot = read_metrics(metrics)
    for p in partitions:
        group = snapshot.get(f"standby.counts.Partition {p}", {})
        k = job.committed(p)
        if group.get("standby-committed-offset") != k or group.get("standby-checkpoint-offset") != k:
            return False
    return True


@pytest.mark.crash
def test_a_standby_makes_failover_skip_the_full_restore_and_never_writes(tmp_path, broker):
    name = "standby"
    job = Job(broker, name)
    create_topic(broker, job.input, PARTITIONS)
    expected = produce_keyed(broker, job.input, 8_000, seed=21)
    two = [
        write_config(tmp_path / f"c{i}.properties", properties(name, broker, tmp_path / f"c{i}", 2, 2))
        for i in (0, 1)
    ]
    metrics = [tmp_path / f"c{i}.metrics.json" for i in (0, 1)]

    def start(i: int):
        log = tmp_path / f"c{i}.log"
        return start_job(two[i], "--container-id", str(i), "--metrics-file", str(metrics[i]), log=log)

    # Container 1 first: its tasks commit everything before container 0 and its standby start.
    c1 = start(1)
    c0 = None
    try:
        wait_for(lambda: job.processed(MOVED), timeout=120, what="container 1 to process its input")
        changelog_before = job.changelog_records(MOVED)
        checkpoints_before = job.checkpoint_records(MOVED)
        c0 = start(0)
        wait_for(lambda: job.processed(STAYED), timeout=120, what="container 0 to process its input")
        wait_for(lambda: standby_caught_up(job, metrics[0], MOVED), timeout=120, what="the standby on c0")
        wait_for(lambda: standby_caught_up(job, metrics[1], STAYED), timeout=120, what="the standby on c1")

        # The standby of tasks 1 and 3 replayed their whole changelog and wrote nothing: no
        # changelog record for their partitions, no checkpoint for their tasks.
        assert job.changelog_records(MOVED) == changelog_before
        assert job.checkpoint_records(MOVED) == checkpoints_before
        snapshot = read_metrics(metrics[0])
        assert metric_sum(snapshot, "standby.counts.Partition ", "standby-applied-messages") == (
            job.committed(1) + 1 + job.committed(3) + 1
        )
        assert metric_sum(snapshot, "standby.counts.Partition ", "standby-lag") == 0

        # More input while both run: the standbys follow the owners' commits.
        expected += produce_keyed(broker, job.input, 8_000, seed=22)
        wait_for(lambda: job.processed(MOVED + STAYED), timeout=120, what="the second input")
        wait_for(lambda: standby_caught_up(job, metrics[0], MOVED), timeout=120, what="the standby on c0")

        kill9(c1)  # container 1 dies, and its machine with it
        c0.send_signal(signal.SIGTERM)
        assert c0.wait(timeout=60) == 0
    finally:
        for process in (c0, c1):
            if process is not None:
                kill9(process)

    moved_changelog = job.changelog_records(MOVED)
    # one changelog record per message (no object cache): what a restore without standbys replays
    assert moved_changelog == sum(1 for r in consume_all(broker, job.input) if r.partition in MOVED)
    expected += produce_keyed(broker, job.input, 2_000, seed=23)
    one = write_config(tmp_path / "one.properties", properties(name, broker, tmp_path / "c0", 1, 1))
    after = tmp_path / "one.metrics.json"

    result = run_job(one, "--exit-at-end", "--metrics-file", str(after))

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "c0") == dict(expected)
    snapshot = read_metrics(after)
    assert moved_changelog > 5_000
    for p in MOVED + STAYED:  # moved tasks: from the standby's checkpoint at K; the others: local
        assert metric_sum(snapshot, f"store.counts.Partition {p}", "restored-messages") == 0, p
        assert metric_sum(snapshot, f"store.counts.Partition {p}", "trimmed-messages") == 0, p
    assert "adopted the standby checkpoint" in result.stderr
    start_log = (tmp_path / "c0.log").read_text()
    assert "container 0 keeps warm copies of stores counts of tasks Partition 1, Partition 3" in start_log


@pytest.mark.crash
def test_the_failed_container_restarted_on_the_standbys_base_dir_replays_nothing(tmp_path, broker):
    name = "standby-same-dir"
    job = Job(broker, name)
    create_topic(broker, job.input, PARTITIONS)
    expected = produce_keyed(broker, job.input, 6_000, seed=31)
    configs = [
        write_config(tmp_path / f"c{i}.properties", properties(name, broker, tmp_path / f"c{i}", 2, 2))
        for i in (0, 1)
    ]
    metrics = [tmp_path / f"c{i}.metrics.json" for i in (0, 1)]
    log = tmp_path / "jobs.log"
    c0 = start_job(configs[0], "--container-id", "0", "--metrics-file", str(metrics[0]), log=log)
    c1 = start_job(configs[1], "--container-id", "1", log=log)
    again = None
    try:
        wait_for(lambda: job.processed(MOVED + STAYED), timeout=120, what="the first input")
        wait_for(lambda: standby_caught_up(job, metrics[0], MOVED), timeout=120, what="the standby on c0")
        kill9(c1)
        expected += produce_keyed(broker, job.input, 2_000, seed=32)

        # Container 1 again, on container 0's machine and base dir, while container 0 and its
        # standby of tasks 1 and 3 go on there.
        after = tmp_path / "again.metrics.json"
        again = start_job(configs[0], "--container-id", "1", "--metrics-file", str(after), log=log)
        wait_for(lambda: job.processed(MOVED + STAYED), timeout=120, what="the second input")
        wait_for(lambda: standby_caught_up(job, metrics[0], MOVED), timeout=120, what="the standby again")
        for process in (c0, again):
            process.send_signal(signal.SIGTERM)
        assert [c0.wait(timeout=60), again.wait(timeout=60)] == [0, 0]
    finally:
        for process in (c0, c1, again):
            if process is not None:
                kill9(process)

    snapshot = read_metrics(after)
    for p in MOVED:
        assert metric_sum(snapshot, f"store.counts.Partition {p}", "restored-messages") == 0, p
    assert read_counts(tmp_path / "c0") == dict(expected)
    assert "adopted the standby checkpoint" in log.read_text()


def test_a_standby_copy_stops_at_the_committed_offset_and_restarts_from_its_checkpoint(tmp_path, broker):
    topic = "standby-store-changelog"
    create_topic(broker, topic, 1, compact=True)
    # offsets 0..99: k0..k9 take values v0..v99 in turn; offset 100 deletes k0; 101..119 follow
    produce(broker, topic, ((f"k{i % 10}".encode(), f"v{i}".encode()) for i in range(100)), partition=0)
    produce(broker, topic, [(b"k0", None)], partition=0)
    produce(broker, topic, ((f"k{i % 10}".encode(), f"v{i}".encode()) for i in range(101, 120)), partition=0)
    config = StoreConfig("s", changelog=SystemStream("kafka", topic))
    stop = threading.Event()

    def state(copy: StandbyStore) -> dict[bytes, bytes]:
        with copy.raw.all() as entries:
            return {e.key: e.value for e in entries}

    def replayed(k: int) -> dict[bytes, bytes]:
        values: dict[bytes, bytes | None] = {}
        for i in range(k + 1):
            values[f"k{i % 10}".encode()] = None if i == 100 else f"v{i}".encode()
        return {key: value for key, value in values.items() if value is not None}

    first = StandbyStore(config, 0, tmp_path, broker, MetricsGroup("first"))
    try:
        first.catch_up(60, stop)
        assert (first.applied, state(first)) == (60, replayed(60))  # not one record beyond K
        first.maybe_checkpoint(now=0.0, commit_s=1.0)
        first.catch_up(105, stop)
        first.maybe_checkpoint(now=0.5, commit_s=1.0)  # within commit_s of the last: none
        assert (first.applied, first.checkpointed, first.lag) == (105, 60, 45)
        assert state(first) == replayed(105)
        assert b"k0" not in state(first)  # the tombstone at 100 deleted it
    finally:
        first.close()

    # A restarted standby does not trust its working database (it is at 105): it starts from
    # its checkpoint at 60 and replays 61..110 only.
    metrics = MetricsGroup("second")
    second = StandbyStore(config, 0, tmp_path, broker, metrics)
    try:
        second.catch_up(110, stop)
        second.maybe_checkpoint(now=0.0, commit_s=1.0)
        assert state(second) == replayed(110)
        assert metrics.snapshot()["standby-applied-messages"] == 50
        assert [c.offset for c in second.checkpoints.newest_first()] == [110, 60]
        assert metrics.snapshot()["standby-lag"] == 0
    finally:
        second.close()


def test_a_failed_standby_shows_in_health_and_the_container_stays_healthy(tmp_path, broker):
    name = "standby-fails"
    state = tmp_path / "state"
    config = write_config(tmp_path / "job.properties", properties(name, broker, state, 2, 2))
    job = parse_job_config(load_config(config))
    create_topic(broker, f"{name}-counts-changelog", 2, compact=True)
    produce(broker, f"{name}-counts-changelog", [(b"k", b"\x00" * 8)] * 3, partition=1)
    producer = Producer(broker)
    try:
        CheckpointWriter(producer, job.checkpoint_topic).write(
            TaskCheckpoint("Partition 1", {}, {"counts": 2})
        )
        producer.flush()
    finally:
        producer.close()
    # The copy's database cannot be created: a file stands where its directory would be.
    (state / "counts").mkdir(parents=True)
    (state / "counts" / "Partition_1.standby").write_text("not a database")
    status = ContainerStatus()
    status.restoring(["Partition 0"])
    status.running()
    replicas = StandbyReplicas.start_for(job, 0, 2, broker, MetricsRegistry(), status)
    assert replicas is not None
    try:
        wait_for(lambda: status.snapshot()["standby"]["status"] == "failed", timeout=60, what="the failure")
    finally:
        replicas.stop()
    standby = status.snapshot()["standby"]
    assert standby["tasks"] == ["Partition 1"] and "Partition_1.standby" in standby["error"], standby
    assert status.healthy and replicas.failed

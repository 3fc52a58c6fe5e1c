"""Spark bulk restore against the dev broker: the same store as the sequential restore, and a
job started on it replays only the changelog tail."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from support import metric_sum, read_metrics, run_job, write_config

from samzapy.checkpoint import GENERATION_HEADER, CheckpointWriter, TaskCheckpoint
from samzapy.config import load_config, parse_job_config
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.kafka.producer import Producer
from samzapy.metrics import MetricsGroup
from samzapy.spark.restore.bulk import restore_stores
from samzapy.stores.factory import build_store
from samzapy.stores.rocksdb import RocksDBStore

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 4


def produce_changes(broker: str, topic: str, count: int, seed: int) -> dict[int, int]:
    """Random puts (overwrites) and tombstones over 4 partitions; the last offset per partition."""
    rng = random.Random(seed)
    producer = Producer(broker)
    try:
        for i in range(count):
            partition = rng.randrange(PARTITIONS)
            key = f"key-{partition}-{rng.randrange(800):04d}".encode()
            value = None if rng.random() < 0.15 else f"value-{i}-{'x' * rng.randrange(40)}".encode()
            producer.send(topic, key, value, partition=partition)
        producer.flush()
        return {p: producer.acked_offset(topic, p) for p in range(PARTITIONS)}
    finally:
        producer.close()


def write_checkpoints(broker: str, topic: str, store: str, offsets: dict[int, int]) -> None:
    producer = Producer(broker)
    try:
        writer = CheckpointWriter(producer, topic)
        for partition, offset in offsets.items():
            writer.write(TaskCheckpoint(f"Partition {partition}", {}, {store: offset}))
        producer.flush()
    finally:
        producer.close()


def store_items(path: Path) -> list[tuple[bytes, bytes]]:
    store = RocksDBStore(path)
    try:
        with store.all() as entries:
            return [(e.key, e.value) for e in entries]
    finally:
        store.close()


def idle_job(broker: str, name: str) -> tuple[str, dict[str, str]]:
    """A job with an idle task and the RocksDB store ``counts``; its changelog and input topics
    created. Returns (changelog topic, properties)."""
    changelog = f"{name}-changelog"
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(changelog, PARTITIONS, compact=True)
        admin.ensure_topic(f"{name}-in", PARTITIONS)
    return changelog, {
        "job.name": name,
        "task.class": "spark_tasks:IdleTask",
        "task.inputs": f"kafka.{name}-in",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{changelog}",
    }


class _NoProducer:
    def acked_offset(self, topic: str, partition: int) -> None:
        return None


def sequential_restore(job, base_dir: Path, partition: int, offset: int, broker: str) -> list:
    config = job.stores["counts"]
    changelog = KafkaChangelog(config.changelog.stream, partition, _NoProducer(), broker)
    store = build_store(
        config,
        partition=partition,
        base_dir=base_dir,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup("sequential"),
    )
    try:
        store.restore(offset, trusted_local=False)
        with store.raw.all() as entries:
            return [(e.key, e.value) for e in entries]
    finally:
        store.close()


def test_spark_restore_equals_sequential_restore_and_job_replays_only_the_tail(
    tmp_path, broker, spark, topic_name
):
    changelog, props = idle_job(broker, f"bulk-{abs(hash(topic_name)) % 10**8}")
    props["job.logged.store.base.dir"] = str(tmp_path / "state")
    config_path = write_config(tmp_path / "job.properties", props)
    job = parse_job_config(load_config(config_path))
    k1 = produce_changes(broker, changelog, 20_000, seed=11)
    write_checkpoints(broker, job.checkpoint_topic, "counts", k1)

    stats = restore_stores(config_path, tmp_path / "state")

    assert {p.partition: p.offset for p in stats.partitions} == k1
    assert stats.records == sum(k1.values()) + PARTITIONS
    for partition in range(PARTITIONS):
        expected = sequential_restore(job, tmp_path / "sequential", partition, k1[partition], broker)
        assert expected, "the test data should leave keys in every partition"
        assert store_items(tmp_path / "state" / "counts" / f"Partition_{partition}") == expected

    # The tail: more changes, committed by "another instance"; the job replays only those.
    k2 = produce_changes(broker, changelog, 2_000, seed=12)
    write_checkpoints(broker, job.checkpoint_topic, "counts", k2)
    metrics = tmp_path / "metrics.json"
    result = run_job(config_path, "--exit-at-end", "--metrics-file", str(metrics), env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert metric_sum(read_metrics(metrics), "store.counts.", "restored-messages") == sum(
        k2[p] - k1[p] for p in range(PARTITIONS)
    )
    final = {
        p: sequential_restore(job, tmp_path / "sequential-2", p, k2[p], broker) for p in range(PARTITIONS)
    }
    for partition in range(PARTITIONS):
        assert store_items(tmp_path / "state" / "counts" / f"Partition_{partition}") == final[partition]

    # The container hook: stores.counts.restore.engine=spark rebuilds a wiped state dir by Spark
    # (in the job's own process), and its sequential restore then has nothing left to replay.
    hooked = write_config(
        tmp_path / "hooked.properties",
        {
            **props,
            "stores.counts.restore.engine": "spark",
            "job.logged.store.base.dir": str(tmp_path / "state-hooked"),
        },
    )
    result = run_job(
        hooked,
        "--exit-at-end",
        "--metrics-file",
        str(metrics),
        env=_env(SAMZAPY_SPARK_RESTORE_MIN_BACKLOG="1"),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "bulk restore:" in result.stderr
    assert metric_sum(read_metrics(metrics), "store.counts.", "restored-messages") == 0
    for partition in range(PARTITIONS):
        path = tmp_path / "state-hooked" / "counts" / f"Partition_{partition}"
        assert store_items(path) == final[partition]


def test_in_memory_plan_and_sort_plan_build_the_same_stores(tmp_path, broker, spark, topic_name):
    """The in-memory plan (last values reduced in Arrow, default for small partitions; with
    either handoff of the SST files) and Spark's external sort (``in_memory_max_records=0``)
    give the sequential restore's stores, the same offsets and record counts, up to a
    checkpoint in the middle of the changelog."""
    changelog, props = idle_job(broker, f"plans-{abs(hash(topic_name)) % 10**8}")
    config_path = write_config(tmp_path / "job.properties", props)
    job = parse_job_config(load_config(config_path))
    committed = produce_changes(broker, changelog, 6_000, seed=21)
    write_checkpoints(broker, job.checkpoint_topic, "counts", committed)
    base = tmp_path / "sequential"
    expected = {p: sequential_restore(job, base, p, committed[p], broker) for p in range(PARTITIONS)}
    produce_changes(broker, changelog, 1_000, seed=22)  # uncommitted: to_checkpoint leaves it out

    plans = (
        ("in-memory", 1_000_000, "shared"),
        ("in-memory-collect", 1_000_000, "collect"),
        ("sort", 0, "shared"),
    )
    stats = {
        plan: restore_stores(
            config_path, tmp_path / plan, to_checkpoint=True, in_memory_max_records=limit, handoff=handoff
        )
        for plan, limit, handoff in plans
    }
    for plan in stats:
        assert {p.partition: p.offset for p in stats[plan].partitions} == committed, plan
        assert stats[plan].records == sum(committed.values()) + PARTITIONS, plan
    for partition in range(PARTITIONS):
        assert expected[partition]
        for plan in stats:
            items = store_items(tmp_path / plan / "counts" / f"Partition_{partition}")
            assert items == expected[partition], plan


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra)
    return env


def produce_with_generations(broker: str, topic: str, partition: int) -> tuple[int, int]:
    """A changelog partition written by generation 1, taken over by generation 2 at offset 9,
    with a zombie of generation 1 writing after the takeover; (the fence start, K)."""
    writes = [(1, f"k{i}", f"g1-{i}") for i in range(10)]  # offsets 0-9: committed by gen 1
    writes += [(2, f"k{i}", "g2") for i in range(5)]  # 10-14: the replacement
    writes += [(1, f"k{i}", "zombie") for i in range(5, 10)] + [(1, "k0", None)]  # 15-20: the zombie
    writes += [(2, "k10", "g2")]  # 21: the replacement's last
    producer = Producer(broker)
    try:
        for generation, key, value in writes:
            producer.send(
                topic,
                key.encode(),
                None if value is None else value.encode(),
                partition=partition,
                headers=[(GENERATION_HEADER, str(generation).encode())],
            )
        producer.flush()
        return 9, producer.acked_offset(topic, partition)
    finally:
        producer.close()


def test_both_plans_leave_out_a_zombies_records_after_the_takeover(tmp_path, broker, spark, topic_name):
    """With ``to_checkpoint``, the checkpoint's changelog fence applies: records of a lower
    generation after the offsets its generation claimed the task at are not restored."""
    changelog, props = idle_job(broker, f"fenced-{abs(hash(topic_name)) % 10**8}")
    config_path = write_config(tmp_path / "job.properties", props)
    job = parse_job_config(load_config(config_path))
    producer = Producer(broker)
    try:
        writer = CheckpointWriter(producer, job.checkpoint_topic)
        for partition in range(PARTITIONS):
            start, k = produce_with_generations(broker, changelog, partition)
            fence = {"fence_generation": 2, "fence_offsets": {"counts": start}}
            writer.write(TaskCheckpoint(f"Partition {partition}", {}, {"counts": k}, 2, **fence))
        producer.flush()
    finally:
        producer.close()
    expected = sorted(
        [(f"k{i}".encode(), b"g2") for i in range(5)]
        + [(f"k{i}".encode(), f"g1-{i}".encode()) for i in range(5, 10)]
        + [(b"k10", b"g2")]
    )

    for plan, limit in (("in-memory", 1_000_000), ("sort", 0)):
        stats = restore_stores(config_path, tmp_path / plan, to_checkpoint=True, in_memory_max_records=limit)
        assert {p.partition: p.offset for p in stats.partitions} == dict.fromkeys(range(PARTITIONS), 21), plan
        for partition in range(PARTITIONS):
            assert store_items(tmp_path / plan / "counts" / f"Partition_{partition}") == expected, plan

"""Stateful jobs end to end: stores restored exactly after crashes (DESIGN §5-6, issue 3).

Real dev broker, real RocksDB on disk, real job subprocesses killed with SIGKILL.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from support import (
    changelog_counts,
    consume_all,
    create_topic,
    job_env,
    kill9,
    metric_sum,
    produce,
    read_counts,
    read_metrics,
    read_store,
    run_job,
    start_job,
    write_config,
)

from samzapy.checkpoint import read_checkpoints
from samzapy.config import Config, parse_job_config
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.serdes import SerdeResolver
from samzapy.stores.factory import build_store

pytestmark = pytest.mark.integration

PARTITIONS = 4


def counting_properties(tmp_path: Path, broker: str, name: str, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "300",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.object.cache.size": "500",
        "stores.counts.write.batch.size": "100",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        **extra,
    }


def produce_keyed(broker: str, topic: str, count: int, keys: int, seed: int) -> Counter:
    """``count`` messages over ``keys`` keys, partitioned by key; returns the count per key."""
    rng = random.Random(seed)
    create_topic(broker, topic, PARTITIONS)
    keyed = [f"key-{rng.randrange(keys)}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


def digest(entries: dict) -> str:
    return hashlib.sha256(repr(sorted(entries.items())).encode()).hexdigest()


def test_seed_task_store_holds_the_last_value_per_key_of_each_partition(tmp_path, broker):
    name = "seed-task"
    create_topic(broker, f"{name}-in", PARTITIONS)
    rng = random.Random(5)
    records = [(f"k{rng.randrange(300)}".encode(), f"v{i}".encode()) for i in range(5000)]
    produce(broker, f"{name}-in", records)
    config = write_config(
        tmp_path / "seed.properties",
        {
            "job.name": name,
            "task.class": "stateful_tasks:MyStatefulTask",
            "task.inputs": f"kafka.{name}-in",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.samza.offset.default": "oldest",
            # the five lines of seed 002, as they are
            "stores.my-store.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
            "stores.my-store.changelog": f"kafka.{name}-changelog",
            "serializers.registry.string.class": "org.apache.samza.serializers.StringSerdeFactory",
            "stores.my-store.key.serde": "string",
            "stores.my-store.msg.serde": "string",
            "job.logged.store.base.dir": str(tmp_path / "state"),
        },
    )

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    expected = {k.decode(): v.decode() for k, v in records}  # keys live in one partition each
    assert read_store(tmp_path / "state", "my-store", bytes.decode, bytes.decode) == expected
    changelog = {r.key.decode(): r.value.decode() for r in consume_all(broker, f"{name}-changelog")}
    assert changelog == expected


@pytest.mark.crash
def test_counts_are_exact_after_repeated_kill9(tmp_path, broker):
    name = "count-kill"
    expected = produce_keyed(broker, f"{name}-in", 100_000, 2000, seed=21)
    config = write_config(tmp_path / "c.properties", counting_properties(tmp_path, broker, name))
    rng = random.Random(99)
    for attempt in range(3):
        job = start_job(config, log=tmp_path / "job.log")
        time.sleep(rng.uniform(2.0, 5.0))
        kill9(job)
        assert job.returncode == -9, f"attempt {attempt}: the job ended before it was killed"

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(expected)
    assert changelog_counts(broker, f"{name}-counts-changelog")[0] == dict(expected)


CRASH_CASES = [
    # (first run's crash point, what the test checks it interrupted)
    "after-changelog-send:3000",
    "after-producer-flush:3",
    "after-local-checkpoint:3",
]


@pytest.mark.crash
@pytest.mark.parametrize("crash_at", CRASH_CASES)
def test_counts_are_exact_after_a_crash_at_a_named_point(tmp_path, broker, crash_at):
    name = "count-" + crash_at.split(":")[0]
    expected = produce_keyed(broker, f"{name}-in", 30_000, 500, seed=len(name))
    props = counting_properties(tmp_path, broker, name)
    if crash_at.startswith("after-changelog-send"):  # counts every change's send
        props["stores.counts.changelog.coalesce"] = "false"
    config = write_config(tmp_path / "c.properties", props)

    crashed = run_job(config, env=job_env(SAMZAPY_CRASH_AT=crash_at))
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(expected)


@pytest.mark.crash
@pytest.mark.parametrize("restore_crash", ["during-restore", "during-trim"])
def test_a_restore_killed_midway_is_repaired_by_the_next_one(tmp_path, broker, restore_crash):
    name = "count-" + restore_crash
    props = counting_properties(
        tmp_path,
        broker,
        name,
        **{"stores.counts.object.cache.size": "0", "stores.counts.changelog.coalesce": "false"},
    )
    del props["stores.counts.write.batch.size"]
    config = write_config(tmp_path / "c.properties", props)
    # A committed changelog (something to replay) from a run that ends with a commit: a crash
    # alone does not ensure one, since a commit is due every 300 ms and the job sends 40,000
    # changelog records in about that time.
    expected = produce_keyed(broker, f"{name}-in", 30_000, 20_000, seed=3)
    assert run_job(config, "--exit-at-end").returncode == 0
    expected += produce_keyed(broker, f"{name}-in", 30_000, 20_000, seed=4)
    # a crash leaves changelog records beyond the checkpoint (something to trim)
    crashed = run_job(config, env=job_env(SAMZAPY_CRASH_AT="after-changelog-send:20000"))
    assert crashed.returncode == -9
    shutil.rmtree(tmp_path / "state")  # the task "moved": restore replays from the changelog
    interrupted = run_job(config, "--exit-at-end", env=job_env(SAMZAPY_CRASH_AT=restore_crash))
    assert interrupted.returncode == -9, interrupted.stderr[-3000:]

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(expected)


@pytest.mark.crash
def test_live_restored_and_replayed_stores_are_identical_after_a_crash(tmp_path, broker):
    name = "count-equiv"
    expected = produce_keyed(broker, f"{name}-in", 30_000, 1000, seed=8)
    # every change sent: the crash below counts sends and leaves a changelog tail to trim
    props = counting_properties(tmp_path, broker, name, **{"stores.counts.changelog.coalesce": "false"})
    config = write_config(tmp_path / "c.properties", props)
    assert run_job(config, env=job_env(SAMZAPY_CRASH_AT="after-changelog-send:2000")).returncode == -9
    assert run_job(config, "--exit-at-end").returncode == 0

    live = read_counts(tmp_path / "state")
    # (b) restored from the changelog alone, into an empty directory, to the checkpoint
    job = parse_job_config(Config.from_dict(props))
    checkpoints = read_checkpoints(broker, job.checkpoint_topic)
    serdes = SerdeResolver(job)
    restored_dir = tmp_path / "restored"
    for partition in range(PARTITIONS):
        store = build_store(
            job.stores["counts"],
            partition=partition,
            base_dir=restored_dir,
            key_serde=serdes.get("string"),
            msg_serde=serdes.get("long"),
            # read-only: a restore to a checkpoint with nothing to trim never writes (a send raises)
            changelog=KafkaChangelog.read_only(f"{name}-counts-changelog", partition, broker),
            metrics=MetricsGroup("restore"),
        )
        store.restore(checkpoints[f"Partition {partition}"].changelog_offsets["counts"])
        store.close()
    restored = read_store(
        restored_dir, "counts", bytes.decode, lambda v: int.from_bytes(v, "big", signed=True)
    )
    # (c) replaying the input up to the checkpointed input offsets
    consumed_to = {str(ssp): off for c in checkpoints.values() for ssp, off in c.input_offsets.items()}
    replayed = Counter(
        r.key.decode()
        for r in consume_all(broker, f"{name}-in")
        if r.offset < consumed_to[f"kafka.{name}-in.{r.partition}"]
    )

    assert digest(live) == digest(restored) == digest(dict(replayed)) == digest(dict(expected))


def test_clean_restart_replays_only_the_changelog_tail(tmp_path, broker):
    name = "count-incremental"
    first = produce_keyed(broker, f"{name}-in", 20_000, 3000, seed=1)
    config = write_config(tmp_path / "c.properties", counting_properties(tmp_path, broker, name))
    metrics = tmp_path / "metrics.json"
    assert run_job(config, "--exit-at-end", "--metrics-file", str(metrics)).returncode == 0
    assert metric_sum(read_metrics(metrics), "store.counts", "restored-messages") == 0
    second = produce_keyed(broker, f"{name}-in", 2_000, 3000, seed=2)

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert metric_sum(read_metrics(metrics), "store.counts", "restored-messages") == 0  # local store trusted
    assert read_counts(tmp_path / "state") == dict(first + second)
    # without the local store, everything comes back from the changelog, and equals it
    shutil.rmtree(tmp_path / "state")
    produce_keyed(broker, f"{name}-in", 0, 1, seed=3)
    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))
    assert result.returncode == 0, result.stderr[-3000:]
    changelog_records = len(consume_all(broker, f"{name}-counts-changelog"))
    assert metric_sum(read_metrics(metrics), "store.counts", "restored-messages") == changelog_records
    assert read_counts(tmp_path / "state") == dict(first + second)


def test_changelog_with_a_different_partition_count_fails_at_startup(tmp_path, broker):
    name = "count-mismatch"
    produce_keyed(broker, f"{name}-in", 100, 10, seed=1)
    create_topic(broker, f"{name}-counts-changelog", 2, compact=True)
    config = write_config(tmp_path / "c.properties", counting_properties(tmp_path, broker, name))

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 1
    assert f"{name}-counts-changelog" in result.stderr
    assert "2" in result.stderr and "4" in result.stderr


@pytest.mark.crash
@pytest.mark.parametrize("keep_local_store", [True, False])
def test_samza_transactional_state_case(tmp_path, broker, keep_local_store):
    """Samza's TransactionalStateIntegrationTest: uncommitted writes are undone after a crash."""
    import json

    name = f"txn-{'keep' if keep_local_store else 'wipe'}"
    create_topic(broker, f"{name}-in", 1)
    produce(
        broker,
        f"{name}-in",
        [(b"k", m.encode()) for m in ["1", "2", "3", "2", "97", "-97", ":98", ":99", ":crash_once"]],
    )
    props = {
        "job.name": name,
        "task.class": "stateful_tasks:TransactionalStateTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "600000",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.store.factory": "rocksdb",
        "stores.store.changelog": f"kafka.{name}-changelog",
        "stores.store.key.serde": "string",
        "stores.store.msg.serde": "string",
        "job.logged.store.base.dir": str(tmp_path / "state"),
    }
    config = write_config(tmp_path / "t.properties", props)
    env = job_env(CRASH_MARKER=str(tmp_path / "crashed"), STORE_AT_INIT=str(tmp_path / "at-init.json"))

    first = run_job(config, "--exit-at-end", env=env)
    assert first.returncode == -9, first.stderr[-3000:]
    if not keep_local_store:
        shutil.rmtree(tmp_path / "state")
    produce(broker, f"{name}-in", [(b"k", m.encode()) for m in ["4", "5", "5"]])
    second = run_job(config, "--exit-at-end", env=env)

    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads((tmp_path / "at-init.json").read_text()) == {"1": "1", "2": "2", "3": "3"}
    final = {"1": "1", "2": "2", "3": "3", "4": "4", "5": "5", "98": "98", "99": "99"}
    assert read_store(tmp_path / "state", "store", bytes.decode, bytes.decode) == final
    assert {k: v for k, v in _last_values(broker, f"{name}-changelog").items() if v is not None} == final


def _last_values(broker: str, topic: str) -> dict[str, str | None]:
    state: dict[str, str | None] = {}
    for record in consume_all(broker, topic):
        state[record.key.decode()] = None if record.value is None else record.value.decode()
    return state

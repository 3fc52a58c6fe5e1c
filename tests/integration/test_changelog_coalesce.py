"""Coalesced changelogs (``stores.<store>.changelog.coalesce=true``) keep state exactly-once.

With coalescing the changelog is sent at commit, one record per changed key, so a crash now
lands in the middle of those sends, or between them and the checkpoint. Real dev broker,
real RocksDB, job subprocesses killed with SIGKILL at named points.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from support import changelog_counts, create_topic, job_env, produce, read_counts, run_job, write_config

pytestmark = pytest.mark.integration

PARTITIONS = 4


def properties(tmp_path: Path, broker: str, name: str) -> dict[str, str]:
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
        "stores.counts.changelog.coalesce": "true",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.object.cache.size": "500",
        "stores.counts.write.batch.size": "100",
        "job.logged.store.base.dir": str(tmp_path / "state"),
    }


def produce_keyed(broker: str, topic: str, count: int, keys: int, seed: int) -> Counter:
    rng = random.Random(seed)
    create_topic(broker, topic, PARTITIONS)
    keyed = [f"key-{rng.randrange(keys)}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


@pytest.mark.crash
@pytest.mark.parametrize(
    "crash_at",
    # mid-way through a commit's sends (each of the 500 keys is sent at least once, so 300 is
    # reached); after an acknowledged flush; after the local store checkpoints, before the
    # Kafka checkpoint
    ["after-changelog-send:300", "after-producer-flush:2", "after-local-checkpoint:2"],
)
def test_counts_are_exact_after_a_crash_with_a_coalesced_changelog(tmp_path, broker, crash_at):
    name = "coalesce-" + crash_at.split(":")[0]
    expected = produce_keyed(broker, f"{name}-in", 30_000, 500, seed=len(name))
    config = write_config(tmp_path / "c.properties", properties(tmp_path, broker, name))

    crashed = run_job(config, env=job_env(SAMZAPY_CRASH_AT=crash_at))
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(expected)
    state, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert state == dict(expected)


def test_a_coalesced_changelog_restores_the_same_store_with_fewer_records(tmp_path, broker):
    name = "coalesce-restore"
    expected = produce_keyed(broker, f"{name}-in", 20_000, 200, seed=11)
    config = write_config(tmp_path / "c.properties", properties(tmp_path, broker, name))
    assert run_job(config, "--exit-at-end").returncode == 0
    state, records = changelog_counts(broker, f"{name}-counts-changelog")
    assert state == dict(expected)
    # 20,000 updates of 200 keys: one record per changed key per commit, not per update
    assert records < 20_000 // 2

    shutil.rmtree(tmp_path / "state")  # the task "moved": restore from the changelog
    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(expected)

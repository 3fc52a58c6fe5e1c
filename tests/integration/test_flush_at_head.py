"""``stores.<store>.flush.at.head``: stores flushed between polls while the input is caught up
keep state exactly-once, and still coalesce while the job is behind.

Real dev broker, real RocksDB, job subprocesses killed with SIGKILL.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from support import (
    changelog_counts,
    create_topic,
    job_env,
    kill9,
    produce,
    read_counts,
    run_job,
    start_job,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4


def properties(tmp_path: Path, broker: str, name: str, commit_ms: int) -> dict[str, str]:
    return {
        "job.name": name,
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": str(commit_ms),
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
        "stores.counts.flush.at.head": "true",
        "job.logged.store.base.dir": str(tmp_path / "state"),
    }


def keyed(count: int, keys: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"key-{rng.randrange(keys)}" for _ in range(count)]


def produce_keys(broker: str, topic: str, keys: list[str]) -> None:
    produce(broker, topic, ((k.encode(), b"m") for k in keys))


@pytest.mark.crash
def test_counts_are_exact_after_a_crash_in_a_flush_between_commits(tmp_path, broker):
    name = "head-flush-crash"
    create_topic(broker, f"{name}-in", PARTITIONS)
    keys = keyed(12_000, 300, seed=3)
    # Commits 2 minutes apart: the changelog sends before the crash can only come from flushes
    # at the head (the job is fed in small chunks, so its polls are not full).
    config = write_config(tmp_path / "c.properties", properties(tmp_path, broker, name, 120_000))
    crash = job_env(SAMZAPY_CRASH_AT="after-changelog-send:200")
    job = start_job(config, env=crash, log=tmp_path / "job.log")

    def feed() -> None:
        for start in range(0, len(keys), 400):
            produce_keys(broker, f"{name}-in", keys[start : start + 400])
            time.sleep(0.05)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        wait_for(lambda: job.poll() is not None, timeout=90, what="the crash inside a flush at the head")
    finally:
        feeder.join()
        kill9(job)
    assert job.returncode == -9, (tmp_path / "job.log").read_text()[-3000:]

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(Counter(keys))
    state, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert state == dict(Counter(keys))


def test_the_changelog_is_sent_between_commits_at_the_head_and_restores_exactly(tmp_path, broker):
    name = "head-flush-live"
    create_topic(broker, f"{name}-in", PARTITIONS)
    keys = keyed(2_000, 100, seed=5)
    config = write_config(tmp_path / "c.properties", properties(tmp_path, broker, name, 120_000))
    job = start_job(config, log=tmp_path / "job.log")
    try:
        produce_keys(broker, f"{name}-in", keys)
        # all of it reaches the changelog long before the first commit (2 minutes away)
        wait_for(
            lambda: changelog_counts(broker, f"{name}-counts-changelog")[0] == dict(Counter(keys)),
            timeout=60,
            what="the counts in the changelog before any commit",
        )
    finally:
        kill9(job)

    result = run_job(config, "--exit-at-end")  # nothing was committed: from the start again

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(tmp_path / "state") == dict(Counter(keys))
    state, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert state == dict(Counter(keys))


def test_a_backlog_is_still_coalesced(tmp_path, broker):
    name = "head-flush-backlog"
    create_topic(broker, f"{name}-in", PARTITIONS)
    keys = keyed(40_000, 200, seed=7)
    produce_keys(broker, f"{name}-in", keys)
    config = write_config(tmp_path / "c.properties", properties(tmp_path, broker, name, 120_000))

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 0, result.stderr[-3000:]
    state, records = changelog_counts(broker, f"{name}-counts-changelog")
    assert state == dict(Counter(keys))
    # full polls (behind) are not flushed: far fewer records than updates
    assert records < len(keys) // 4

"""Several containers (issue 7 part 4): a static split of tasks, a move to fewer containers
with stores restored from the changelog, and fencing of a zombie container.

Real dev broker, RocksDB stores, job subprocesses (SIGKILL, SIGSTOP, SIGCONT).
"""

from __future__ import annotations

import random
import shutil
import signal
import time
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

from samzapy.checkpoint import TaskCheckpoint, read_checkpoints

pytestmark = pytest.mark.integration

PARTITIONS = 4


def properties(state: Path, broker: str, name: str, containers: int, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "job.container.count": str(containers),
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
        "job.logged.store.base.dir": str(state),
        **extra,
    }


def produce_keyed(broker: str, topic: str, count: int, keys: int, seed: int) -> Counter:
    rng = random.Random(seed)
    create_topic(broker, topic, PARTITIONS)
    keyed = [f"key-{rng.randrange(keys)}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


def test_two_containers_then_one_after_a_kill_stay_exact(tmp_path, broker):
    name = "two-containers"
    state = tmp_path / "state"
    expected = produce_keyed(broker, f"{name}-in", 20_000, 800, seed=1)
    two = write_config(tmp_path / "two.properties", properties(state, broker, name, 2))
    runs = [
        start_job(two, "--container-id", str(i), "--exit-at-end", log=tmp_path / f"c{i}.log") for i in (0, 1)
    ]
    assert [r.wait(timeout=180) for r in runs] == [0, 0]
    assert read_counts(state) == dict(expected)

    expected += produce_keyed(broker, f"{name}-in", 20_000, 800, seed=2)
    runs = [start_job(two, "--container-id", str(i), log=tmp_path / f"c{i}.log") for i in (0, 1)]
    time.sleep(4)
    kill9(runs[1])  # container 1 dies; its machine is gone with its stores
    runs[0].send_signal(signal.SIGTERM)
    assert runs[0].wait(timeout=60) == 0
    for p in (1, 3):
        for path in (state / "counts").glob(f"Partition_{p}*"):  # the store and its local checkpoints
            shutil.rmtree(path)
    one = write_config(tmp_path / "one.properties", properties(state, broker, name, 1))
    metrics = tmp_path / "metrics.json"

    result = run_job(one, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert read_counts(state) == dict(expected)
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "store.counts.Partition 1", "restored-messages") > 0  # moved: restored
    assert metric_sum(snapshot, "store.counts.Partition 0", "restored-messages") == 0  # stayed: local


def _end(broker: str, topic: str) -> int:
    return len(consume_all(broker, topic))


def test_a_stopped_then_resumed_container_is_fenced(tmp_path, broker):
    name = "zombie"
    expected = produce_keyed(broker, f"{name}-in", 10_000, 300, seed=3)
    props = properties(tmp_path / "a", broker, name, 1, **{"task.commit.ms": "500"})
    config_a = write_config(tmp_path / "a.properties", props)
    checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"
    zombie = start_job(config_a, log=tmp_path / "a.log")
    try:

        def a_done() -> bool:
            found = read_checkpoints(broker, checkpoint_topic)
            return sum(o for c in found.values() for o in c.input_offsets.values()) == 10_000

        wait_for(a_done, timeout=120, what="container A to process the first input")
        zombie.send_signal(signal.SIGSTOP)
        expected += produce_keyed(broker, f"{name}-in", 10_000, 300, seed=4)
        config_b = write_config(
            tmp_path / "b.properties", {**props, "job.logged.store.base.dir": tmp_path / "b"}
        )
        takeover = run_job(config_b, "--exit-at-end")
        assert takeover.returncode == 0, takeover.stderr[-3000:]
        changelog_end = _end(broker, f"{name}-counts-changelog")
        checkpoints_end = _end(broker, checkpoint_topic)

        zombie.send_signal(signal.SIGCONT)
        assert zombie.wait(timeout=60) == 1  # fenced: exit 1 naming the new owner (issue 28)
    finally:
        if zombie.poll() is None:
            zombie.send_signal(signal.SIGCONT)
            kill9(zombie)

    log = (tmp_path / "a.log").read_text()
    assert "fenced: another container owns it now" in log
    assert "Error: fenced: tasks taken over by another container: Partition 0 by " in log
    assert _end(broker, f"{name}-counts-changelog") == changelog_end  # nothing written after the takeover
    assert _end(broker, checkpoint_topic) == checkpoints_end
    assert read_counts(tmp_path / "b") == dict(expected)
    generations = {
        TaskCheckpoint.from_bytes(r.value).generation for r in consume_all(broker, checkpoint_topic)
    }
    assert generations == {1, 2}

"""Where a moving task's state comes from in group mode (issue 15).

- With ``job.standbytasks.replication.factor=2`` every task has a warm copy on the other
  member; after a kill -9 the survivor adopts the copy and replays at most one commit interval
  of changelog (at most the records the dead owner committed between two checkpoints).
- Without standbys the survivor restores the tasks in the background while its own tasks keep
  processing (messages processed while ``tasks-restoring`` is set).

Real dev broker, RocksDB stores, member subprocesses (SIGKILL, SIGTERM).
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from group_support import (
    KeyedProducer,
    checkpointed_total,
    member_config,
    produce_keyed,
    running_tasks,
)
from support import changelog_counts, consume_all, create_topic, kill9, read_metrics, start_job, wait_for

from samzapy.checkpoint import TaskCheckpoint

pytestmark = [pytest.mark.integration, pytest.mark.crash]

TASKS = 4
BACKGROUND = re.compile(
    r"Partition (\d+): restored in [\d.]+s in the background, while this member's other tasks processed (\d+)"
)
RESTORED = re.compile(
    r"restored KafkaChangelog\('[^']+', (\d+)\) (?:to changelog offset \d+|with nothing committed yet) "
    r"from ([^:]+): (\d+) records"
)


def restores(log: Path) -> dict[int, list[tuple[str, int]]]:
    """Changelog partition -> (from where, records replayed) of every restore the log shows."""
    found: dict[int, list[tuple[str, int]]] = {}
    for partition, base, replayed in RESTORED.findall(log.read_text(errors="replace")):
        found.setdefault(int(partition), []).append((base, int(replayed)))
    return found


def largest_commit_step(broker: str, topic: str, task: str) -> int:
    """The most changelog records ``task`` committed between two of its checkpoints."""
    offsets = []
    for record in consume_all(broker, topic):
        if record.value is None:
            continue
        checkpoint = TaskCheckpoint.from_bytes(record.value)
        if checkpoint.task_name == task and checkpoint.changelog_offsets.get("counts") is not None:
            offsets.append(checkpoint.changelog_offsets["counts"])
    return max((b - a for a, b in zip(offsets, offsets[1:], strict=False)), default=0)


def start_two_members(tmp_path: Path, broker: str, name: str, extra: dict[str, str]):
    """Create ``name``'s input, start members a and b on it (metrics files next to their
    logs) and wait until they share the tasks; returns (members, logs)."""
    create_topic(broker, f"{name}-in", TASKS)
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    members: dict[str, subprocess.Popen] = {}
    for m in "ab":
        config = member_config(tmp_path, broker, name, m, **extra)
        members[m] = start_job(config, "--metrics-file", str(tmp_path / f"{m}.json"), log=logs[m])
    try:
        wait_for(lambda: running_tasks(logs["a"]) and running_tasks(logs["b"]), 90, what="a and b to share")
    except AssertionError:
        stop_all(members)
        raise
    return members, logs


def stop_all(members: dict[str, subprocess.Popen]) -> None:
    for process in members.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in members.values():
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill9(process)


def test_a_task_moving_to_its_warm_standby_replays_at_most_one_commit_interval(tmp_path, broker):
    name = "group-warm"
    checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"
    extra = {"job.standbytasks.replication.factor": "2", "task.commit.ms": "1000"}
    members, logs = start_two_members(tmp_path, broker, name, extra)
    expected = produce_keyed(broker, f"{name}-in", 10_000, 5_000, seed=21)
    producer = KeyedProducer(broker, f"{name}-in", keys=5_000, rate=1_000, seed=22)
    try:
        wait_for(lambda: "standbys [" in logs["a"].read_text(), 30, what="a to keep standbys")
        b_tasks = running_tasks(logs["b"])
        wait_for(lambda: checkpointed_total(broker, checkpoints) >= 10_000, 60, what="the first input")
        restores_before = restores(logs["a"])
        kill9(members["b"])
        wait_for(lambda: running_tasks(logs["a"]) == list(range(TASKS)), 60, what="a to take b's tasks")
        expected += producer.stop()
        total = sum(expected.values())
        wait_for(lambda: checkpointed_total(broker, checkpoints) == total, 60, what="a to process everything")
    finally:
        producer.stop() if not producer._stop.is_set() else None
        stop_all(members)

    after = restores(logs["a"])
    for task in b_tasks:
        base, replayed = after[task][len(restores_before.get(task, [])) :][-1]
        step = largest_commit_step(broker, checkpoints, f"Partition {task}")
        print(f"task {task}: restored from {base}, {replayed} records replayed (largest commit step {step})")
        assert base.startswith("local checkpoint")  # the adopted standby copy
        assert replayed <= step
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)


def test_without_standbys_a_moving_task_restores_while_the_members_other_tasks_process(tmp_path, broker):
    name = "group-cold"
    checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"
    members, logs = start_two_members(tmp_path, broker, name, {})
    expected = produce_keyed(broker, f"{name}-in", 120_000, 60_000, seed=21)
    producer = KeyedProducer(broker, f"{name}-in", keys=60_000, rate=2_000, seed=23)
    try:
        b_tasks = running_tasks(logs["b"])
        wait_for(lambda: checkpointed_total(broker, checkpoints) >= 120_000, 120, what="the first input")
        restores_before = restores(logs["a"])
        kill9(members["b"])
        wait_for(lambda: running_tasks(logs["a"]) == list(range(TASKS)), 90, what="a to take b's tasks")
        expected += producer.stop()
        total = sum(expected.values())
        wait_for(lambda: checkpointed_total(broker, checkpoints) == total, 90, what="a to process everything")
    finally:
        producer.stop() if not producer._stop.is_set() else None
        stop_all(members)

    after = restores(logs["a"])
    replayed = {t: after[t][len(restores_before.get(t, [])) :][-1][1] for t in b_tasks}
    meanwhile = {int(t): int(n) for t, n in BACKGROUND.findall(logs["a"].read_text()) if int(t) in b_tasks}
    print(f"a replayed {replayed} for b's tasks; its own tasks processed {meanwhile} messages meanwhile")
    assert all(n > 10_000 for n in replayed.values())  # a real restore, not an adopted copy
    assert sum(meanwhile.values()) > 0
    pauses = {
        t: read_metrics(tmp_path / "a.json")[f"task.Partition {t}"]["rebalance-pause-s"] for t in b_tasks
    }
    assert all(0 < p < 60 for p in pauses.values()), pauses  # claim and restore, on a
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)

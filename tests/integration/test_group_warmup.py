"""Moves that wait for a warm copy in group mode (KIP-441, issue 30): a member joining a group
whose tasks have large state takes them only after its warm-up copies caught up, found out by
a probing rebalance the member asks for as soon as its copies are within the acceptable lag
(the periodic probe, every 60 s by default, never comes into it); the warm-up copies start
from the store's newest snapshot in the blob store, not from scratch; the moved tasks restore
from the warm-up copy's checkpoint (a short tail), and every count is exact. The moved tasks
stop for one group round, as in any cooperative move (a normal rebalance's gap): they run on
their old owner until it revokes them, and the first assignment the leader computes after that
gives them to the new member, which runs them from it. Real dev broker, member subprocesses."""

from __future__ import annotations

import re
import signal
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from group_support import KeyedProducer, checkpointed_total, member_config, produce_keyed, running_tasks
from support import changelog_counts, create_topic, kill9, start_job, wait_for

pytestmark = [pytest.mark.integration]

TASKS = 4
WARMUP = {
    "job.coordinator.max.warmup.replicas": "2",
    "job.coordinator.acceptable.recovery.lag": "2000",
}  # the default probing interval (60 s): the move must come from b's caught-up probe
RESTORED = re.compile(
    r"restored KafkaChangelog\('[^']+', (\d+)\) to changelog offset \d+ from ([^:]+): (\d+) records"
)


def warming_up(log: Path) -> list[str]:
    """Every "warming up" list the member logged, in order."""
    return re.findall(r"warming up (\[[^\]]*\]|none)", log.read_text(errors="replace"))


def stamped(log: Path, pattern: str) -> list[tuple[datetime, re.Match[str]]]:
    """Every line of ``log`` that ``pattern`` matches, with the line's time."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = re.search(pattern, line)
        if match:
            found.append((datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f"), match))
    return found


def rounds_unowned(logs: dict[str, Path], task: int) -> list[str]:
    """The assignments the leader computed while ``task`` was owned by nobody: from a's revoke of
    it to b's start of it (in either member's log, as either may lead)."""
    revoked = stamped(logs["a"], rf"tasks .*Partition {task}\b.* revoked")[0][0]
    started = stamped(logs["b"], rf"Partition {task}: restored in .*processing")[0][0]
    placed = stamped(logs["a"], r"placed \d+ tasks on .*") + stamped(logs["b"], r"placed \d+ tasks on .*")
    return [m.group(0) for t, m in sorted(placed, key=lambda p: p[0]) if revoked < t < started]


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        kill9(process)


def test_a_joining_member_takes_tasks_only_after_its_warm_up_copies_caught_up(tmp_path, broker):
    name = "group-warmup"
    checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"
    create_topic(broker, f"{name}-in", TASKS)
    expected = produce_keyed(broker, f"{name}-in", 60_000, 40_000, seed=30)
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    keys = {**WARMUP, "stores.counts.backup.factories": "kafka,blobstore"}
    keys["blob.store.uri"] = f"file://{tmp_path / 'blobs'}"
    a = start_job(member_config(tmp_path, broker, name, "a", **keys), log=logs["a"])
    b = None
    producer = None
    try:
        wait_for(lambda: running_tasks(logs["a"]) == list(range(TASKS)), 90, what="a to run every task")
        wait_for(lambda: checkpointed_total(broker, checkpoints) >= 60_000, 120, what="a to count the input")
        producer = KeyedProducer(broker, f"{name}-in", keys=40_000, rate=300, seed=31)
        b = start_job(member_config(tmp_path, broker, name, "b", **keys), log=logs["b"])
        wait_for(lambda: any(w != "none" for w in warming_up(logs["b"])), 90, what="b to warm up copies")
        first = next(i for i, w in enumerate(warming_up(logs["b"])) if w != "none")
        running_then = re.findall(r"running tasks (\[[^\]]*\]|none)", logs["b"].read_text())[first]
        assert running_then == "none"  # b took nothing before its copies were warm
        wait_for(lambda: len(running_tasks(logs["b"])) == TASKS // 2, 120, what="b to take its tasks")
        expected += producer.stop()
        total = sum(expected.values())
        wait_for(lambda: checkpointed_total(broker, checkpoints) == total, 90, what="everything counted")
    finally:
        if producer is not None and not producer._stop.is_set():
            producer.stop()
        for process in (p for p in (a, b) if p is not None):
            stop(process)
    text = logs["a"].read_text() + logs["b"].read_text()
    # b asked for the probe once its copies caught up, before b ran any moved task, and no
    # periodic probe (due 60 s after the copies began) came before b ran them
    probed = stamped(logs["b"], r"warm-up copies of tasks \[[^\]]*\] caught up .*: probing rebalance")
    first_run = stamped(logs["b"], r"Partition \d: restored in .*processing")[0][0]
    assert probed and probed[0][0] < first_run, (probed, first_run)
    periodic = stamped(logs["a"], "probing rebalance: are the") + stamped(
        logs["b"], "probing rebalance: are the"
    )
    assert not [t for t, _ in periodic if t < first_run], periodic
    # the warm-up copies began from a's snapshots, then read only the changelog after them
    assert re.search(r"standby of store 'counts' of Partition \d: starts from standby checkpoint", text)
    assert "downloaded as the restore's base" in logs["b"].read_text()
    moved = running_tasks(logs["b"])
    for task in moved:  # restored from the warm-up copy's checkpoint: a tail, not 15,000 records
        base, replayed = [
            (f, int(n)) for p, f, n in RESTORED.findall(logs["b"].read_text()) if int(p) == task
        ][-1]
        assert base.startswith("local checkpoint") and replayed < 2_000, (task, base, replayed)
    # One round unowned, as in a plain cooperative move: the first assignment the leader computes
    # after a's revoke gives b the task, and b takes it from that round. (Two or more: a round
    # was lost, e.g. a member threw away a join that finished between two polls and rejoined,
    # which samzapy.kafka.group_state.keep_finished_joins mends.)
    for task in moved:
        placements = rounds_unowned(logs, task)
        assert len(placements) == 1, (task, placements)
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)

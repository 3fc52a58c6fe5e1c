"""A paused group member whose tasks moved writes nothing after the takeover (issue 15 item 5).

Members a and b share 4 tasks. b stops itself (SIGSTOP, as a long GC pause or a frozen VM
would) right after a poll returned records, before its tasks see them (the ``after-poll``
pause point). Its session expires; a takes its tasks and processes their input, b's batch
included. Then b is resumed with that batch in hand. It must not process it: its lease has
lapsed (the broker has not answered it for half the session), so it holds its tasks until the
group confirms it, asks the fence, and drops them. Then it rejoins and takes a share again, as
a new owner.

Asserted on what landed after the takeover: no checkpoint and no changelog record of b's old
ownership generations, and no output twice (every output id once, one output per input).

Real dev broker, RocksDB stores, member subprocesses (SIGSTOP via the pause point, SIGCONT,
SIGTERM).
"""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from collections import Counter

import pytest
from group_support import checkpointed_total, member_config, produce_keyed, running_tasks
from support import changelog_counts, consume_all, create_topic, header, job_env, kill9, start_job, wait_for

from samzapy.checkpoint import GENERATION_HEADER, TaskCheckpoint
from samzapy.crashpoints import PAUSED_LINE
from samzapy.kafka.broker import free_port
from samzapy.output_ids import ID_HEADER

pytestmark = [pytest.mark.integration, pytest.mark.crash]

TASKS = 4


def end_offsets(broker: str, topic: str) -> dict[int, int]:
    """Partition -> the offset the next record of ``topic`` will get."""
    ends: dict[int, int] = {}
    for record in consume_all(broker, topic):
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    return ends


def records_after(broker: str, topic: str, marks: dict[int, int]) -> list:
    """The records of ``topic`` at or past ``marks`` (partition -> offset)."""
    return [r for r in consume_all(broker, topic) if r.offset >= marks.get(r.partition, 0)]


def owners_before(broker: str, topic: str, marks: dict[int, int]) -> dict[str, TaskCheckpoint]:
    """Task -> its checkpoint of the highest generation written before ``marks``."""
    owners: dict[str, TaskCheckpoint] = {}
    for record in consume_all(broker, topic):
        if record.value is None or record.offset >= marks.get(record.partition, 0):
            continue
        checkpoint = TaskCheckpoint.from_bytes(record.value)
        known = owners.get(checkpoint.task_name)
        if known is None or checkpoint.generation >= known.generation:
            owners[checkpoint.task_name] = checkpoint
    return owners


def membership_settled(port: int, running: list[int]) -> bool:
    """Whether member a's ``/health`` shows a stable membership whose task counts add up to
    the tasks it runs, after it gave tasks away."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            member = json.loads(response.read()).get("membership", {})
    except OSError:
        return False
    held = member.get("tasks_assigned", 0) - member.get("tasks_revoked", 0) - member.get("tasks_lost", 0)
    return (
        member.get("group") == "samzapy-group-zombie-1"
        and member.get("rebalance") == "stable"
        and isinstance(member.get("generation"), int)
        and member.get("tasks_revoked", 0) >= 1
        and held == len(running)
    )


def test_a_paused_member_writes_nothing_after_its_tasks_moved(tmp_path, broker):
    name = "group-zombie"
    topics = {"in": f"{name}-in", "out": f"{name}-out", "changelog": f"{name}-counts-changelog"}
    checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"
    create_topic(broker, topics["in"], TASKS)
    create_topic(broker, topics["out"], TASKS)
    extra = {
        "task.class": "stateful_tasks:CountAndEmitTask",
        "task.commit.ms": "300",
        "app.output": topics["out"],
    }
    port = free_port()
    prometheus = {"metrics.reporters": "prom", "metrics.reporter.prom.class": "prometheus"}
    prometheus |= {"metrics.reporter.prom.host": "127.0.0.1", "metrics.reporter.prom.port": str(port)}
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    members: dict[str, subprocess.Popen] = {}
    for m in "ab":
        config = member_config(tmp_path, broker, name, m, **extra, **(prometheus if m == "a" else {}))
        env = job_env(MEMBER=m, **({"SAMZAPY_PAUSE_AT": "after-poll"} if m == "b" else {}))
        members[m] = start_job(config, env=env, log=logs[m])
    try:
        wait_for(lambda: running_tasks(logs["a"]) and running_tasks(logs["b"]), 90, what="a and b to share")
        b_tasks = running_tasks(logs["b"])
        paused_at = end_offsets(broker, checkpoints)
        expected = produce_keyed(broker, topics["in"], 2_000, 100, seed=11)
        paused = PAUSED_LINE.format(name="after-poll")
        wait_for(lambda: paused in logs["b"].read_text(), 30, what="b to pause with records in hand")
        wait_for(lambda: running_tasks(logs["a"]) == list(range(TASKS)), 60, what="a to take b's tasks")
        wait_for(lambda: checkpointed_total(broker, checkpoints) == 2_000, 60, what="a to process b's share")
        marks = {
            topic: end_offsets(broker, topic) for topic in (checkpoints, topics["changelog"], topics["out"])
        }
        members["b"].send_signal(signal.SIGCONT)  # b holds a batch a has processed already
        wait_for(lambda: "lost: dropped" in logs["b"].read_text(), 60, what="b to learn its tasks are lost")
        expected += produce_keyed(broker, topics["in"], 2_000, 100, seed=12)
        wait_for(lambda: checkpointed_total(broker, checkpoints) == 4_000, 90, what="the last input")
        wait_for(lambda: running_tasks(logs["b"]), 90, what="b to rejoin and take a share again")
        wait_for(lambda: membership_settled(port, running_tasks(logs["a"])), 30, what="a's /health to settle")
        for m in "ab":
            members[m].send_signal(signal.SIGTERM)
        assert [members[m].wait(timeout=60) for m in "ab"] == [0, 0]
    finally:
        for process in members.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                kill9(process)

    # b's ownership of its tasks before the pause: the generation it held each in
    before = owners_before(broker, checkpoints, paused_at)
    stale = {p: before[f"Partition {p}"] for p in b_tasks}
    late_records = records_after(broker, checkpoints, marks[checkpoints])
    late = [TaskCheckpoint.from_bytes(r.value) for r in late_records if r.value]
    zombie_checkpoints = [
        c
        for c in late
        for p, owned in stale.items()
        if c.task_name == owned.task_name and c.generation <= owned.generation
    ]
    assert zombie_checkpoints == []
    late_changelog = records_after(broker, topics["changelog"], marks[topics["changelog"]])
    zombie_records = [
        r
        for r in late_changelog
        if r.partition in stale and int(header(r, GENERATION_HEADER) or 0) <= stale[r.partition].generation
    ]
    assert zombie_records == []
    outputs = consume_all(broker, topics["out"])
    ids = Counter(header(r, ID_HEADER) for r in outputs)
    assert [i for i, n in ids.items() if n > 1] == []  # b processed nothing a processed
    assert len(outputs) == sum(expected.values())
    counts, _ = changelog_counts(broker, topics["changelog"])
    assert counts == dict(expected)

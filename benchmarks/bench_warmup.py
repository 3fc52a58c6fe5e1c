"""Warm-up benchmark (issue 30): how long a task stops when it moves to a member joining a
group, with and without KIP-441 warm-up copies.

A counting job in group mode: member a runs all 4 tasks and counts ``--count`` messages of
distinct keys (so each task's changelog holds ``count / 4`` records); then member b joins. b
gets 2 of the tasks:

- **without warm-up** (``job.coordinator.max.warmup.replicas=0``): at once; a revokes them
  (commit, close), b restores each from its whole changelog, then processes;
- **with warm-up** (``max.warmup.replicas=2``, acceptable lag 1,000 records, the default
  60 s probing interval): b first keeps warm-up copies (restored and kept up from the
  changelog like standbys) while a goes on processing the tasks; b asks for the probing
  rebalance as soon as its copies are within the lag, which moves them, and b restores each
  from its copy's checkpoint.

Measured from the members' logs: the **processing gap** of a moved task (from a's "revoked"
line for that task to b's "restored ... processing" line for it: the time nobody processes it;
the largest over the moved tasks), the **group rounds** it was unowned (the leader's
assignments in that time: 1 is a cooperative move's minimum) and **b's start -> its share
processing**. Input keeps flowing (``--rate`` messages/s) throughout.

Usage: ``python -m benchmarks.bench_warmup [--size tiny|small|full] [--count N] [--rate N]``.
"""

from __future__ import annotations

import re
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchmarks._common import Result, arguments, write_properties
from benchmarks.bench_rebalance import Member, SteadyProducer, wait_until
from samzapy import InitableTask, StreamTask
from samzapy.checkpoint import read_checkpoints
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.producer import Producer

TASKS = 4
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")
RESTORED = re.compile(r"restored KafkaChangelog\('[^']+', (\d+)\) .*?: (\d+) records \([\d.]+ MB\) replayed")


class Count(StreamTask, InitableTask):
    """A read-modify-write count per key (no outputs: the members' logs time the moves)."""

    def init(self, context):  # noqa: D102 - the task API
        self.counts = context.get_store("counts")

    def process(self, envelope, collector, coordinator):  # noqa: D102 - the task API
        self.counts.put(envelope.key, (self.counts.get(envelope.key) or 0) + 1)


def times(log: Path, pattern: str) -> list[float]:
    """Epoch seconds of every line of ``log`` that ``pattern`` (a regex) matches."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = LOG_TIME.match(line)
        if match and re.search(pattern, line):
            found.append(datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return found


def when(log: Path, pattern: str) -> float | None:
    """Epoch seconds of the first line of ``log`` that ``pattern`` matches."""
    found = times(log, pattern)
    return found[0] if found else None


def move_of(task: int, a: Path, b: Path) -> tuple[float, int]:
    """A moved task's processing gap (a's revoke of it to b's start of it) and the group rounds
    (the leader's assignments) in between."""
    revoked = when(a, rf"tasks .*Partition {task}\b.* revoked: committed")
    started = when(b, rf"Partition {task}: restored in .*processing")
    if revoked is None or started is None:
        msg = f"Partition {task}: the logs do not show its move ({a}, {b})"
        raise SystemExit(msg)
    placed = times(a, r"placed \d+ tasks on") + times(b, r"placed \d+ tasks on")
    return started - revoked, sum(1 for t in placed if revoked < t < started)


def prefill(servers: str, topic: str, count: int) -> None:
    producer = Producer(servers)
    for i in range(count):
        producer.send(topic, f"key-{i}".encode(), b"v", partition=i % TASKS)
    producer.flush()
    producer.close()


def counted(servers: str, name: str) -> int:
    checkpoints = read_checkpoints(servers, f"__samza_checkpoint_ver_1_for_{name}_1")
    return sum(sum(cp.input_offsets.values()) for cp in checkpoints.values())


def scenario(workdir: Path, servers: str, name: str, count: int, rate: int, warmup: bool) -> dict[str, float]:
    with TopicAdmin(servers) as admin:
        admin.ensure_topic(f"{name}-in", TASKS)
    prefill(servers, f"{name}-in", count)
    props = {
        "job.name": name,
        "job.coordinator.factory": "group",
        "job.coordinator.session.timeout.ms": "6000",
        "job.coordinator.max.warmup.replicas": "2" if warmup else "0",
        "job.coordinator.acceptable.recovery.lag": "1000",
        "task.class": "benchmarks.bench_warmup:Count",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "1000",
        "systems.kafka.consumer.bootstrap.servers": servers,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
    }
    members = {}
    for m in "ab":
        config = write_properties(
            workdir / f"{name}-{m}.properties",
            {**props, "job.logged.store.base.dir": str(workdir / f"{name}-{m}")},
        )
        members[m] = config
    a = Member(members["a"], workdir / f"{name}-a.log")
    b = None
    producer = None
    try:
        wait_until(lambda: a.running() == list(range(TASKS)), 120, "a to run every task")
        wait_until(lambda: counted(servers, name) >= count, 600, "a to count the prefill")
        producer = SteadyProducer(servers, f"{name}-in", rate)
        b = Member(members["b"], workdir / f"{name}-b.log")
        wait_until(lambda: len(b.running()) == TASKS // 2, 600, "b to take its share")
        time.sleep(2)
        moved = b.running()
        gaps, rounds = zip(*(move_of(t, a.log, b.log) for t in moved), strict=True)
        processing = [when(b.log, rf"Partition {t}: restored in") or 0.0 for t in moved]
        took = [float(x) for x in re.findall(r"Partition \d+: restored in ([\d.]+)s", b.log.read_text())]
        replayed = {int(t): int(n) for t, n in RESTORED.findall(b.log.read_text())}  # the last of each
        return {
            "restore_s": max(took[-len(moved) :]),
            "replayed": max(replayed[t] for t in moved),
            "gap_s": max(gaps),
            "rounds": max(rounds),
            "share_s": max(processing) - b.started,
            "warming_up": float(bool(when(b.log, "caught up .*: probing rebalance"))),
        }
    finally:
        if producer is not None:
            producer.stop()
        for member in (a, b):
            if member is not None:
                member.stop()


def main() -> None:
    args = arguments(__doc__, count=(20_000, 200_000, 1_000_000), rate=(200, 500, 1000))
    result = Result("warmup")
    with tempfile.TemporaryDirectory(prefix="bench-warmup-") as tmp:
        workdir = Path(tmp)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=workdir / "broker")
        servers = f"127.0.0.1:{info.port}"
        try:
            cold = scenario(workdir, servers, "warmup-off", args.count, args.rate, warmup=False)
            warm = scenario(workdir, servers, "warmup-on", args.count, args.rate, warmup=True)
        finally:
            dev_broker.stop(workdir / "broker")
    result.add("moved task's processing gap, no warm-up", cold["gap_s"], "s")
    result.add(
        "moved task's processing gap, warm-up copies", warm["gap_s"], "s", limit=("no warm-up", cold["gap_s"])
    )
    result.add("  group rounds it was unowned, no warm-up", cold["rounds"], "")
    result.add("  group rounds it was unowned, warm-up copies", warm["rounds"], "")
    result.add("  of which the moved tasks' restore, no warm-up", cold["restore_s"], "s")
    result.add("  of which the moved tasks' restore, warm-up copies", warm["restore_s"], "s")
    result.add("  changelog records it replayed, no warm-up", cold["replayed"], "")
    result.add("  changelog records it replayed, warm-up copies", warm["replayed"], "")
    result.add("b start -> its share processing, no warm-up", cold["share_s"], "s")
    result.add("b start -> its share processing, warm-up copies", warm["share_s"], "s")
    result.note(
        f"{args.count:,} messages of distinct keys over {TASKS} tasks ({args.count // TASKS:,} changelog "
        f"records a task) before b joins, then {args.rate} msg/s; session timeout 6 s (the dev broker "
        f"answers a join after about 3 s); b's caught-up probe seen with warm-up: {bool(warm['warming_up'])}"
    )
    result.write(args.result)


if __name__ == "__main__":
    main()

"""Rebalance benchmark (issue 15): how long group mode stops what, on the dev broker.

Three members of one group (``job.coordinator.factory=group``) share 8 tasks of a counting job
while a producer sends a steady input (``--rate`` messages/s over 1,000 keys). Every task sends
each new count as an output, so the output records' timestamps show when each task processed
what. Measured, once without standbys and once with ``job.standbytasks.replication.factor=2``:

- **kill -9 -> processing elsewhere**: from the kill of one member to the first output of the
  last of its tasks on a survivor; the session timeout is part of it (the group notices a dead
  member only when its session expires), and so is the dev broker's join delay;
- **pause of unaffected tasks**: the longest gap between two outputs of a task that stayed on
  its member through the rebalance, next to the longest gap of the same tasks in the seconds
  before (the input rate sets that baseline);
- **a new member takes its share** (without standbys): from the start of a fourth member's
  process to the first output of the last task it was given, with the time it took to join.

Usage: ``python -m benchmarks.bench_rebalance [--size tiny|small|full] [--session-ms N] [--rate N]``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from benchmarks._common import ROOT, Result, arguments, write_properties
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.admin import TopicAdmin
from samzapy.output_ids import ID_HEADER

TASKS = 8
KEYS = 1_000
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


class SteadyProducer:
    """Sends about ``rate`` keyed messages per second to ``topic`` until stopped."""

    def __init__(self, servers: str, topic: str, rate: int) -> None:
        self._producer = KafkaProducer(bootstrap_servers=servers, linger_ms=5)
        self._topic, self._rate = topic, rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            started = time.monotonic()
            for _ in range(self._rate // 20):
                self._producer.send(self._topic, key=f"k{i % KEYS}".encode(), value=b"v")
                i += 1
            self._producer.flush()
            time.sleep(max(0.0, 0.05 - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.close()


class Member:
    """One ``samzapy run`` of the group, its log in a file."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log = log
        self.started = time.time()
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "samzapy", "run", str(config)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def running(self) -> list[int]:
        found = re.findall(r"running tasks (\[[^\]]*\]|none)", self.log.read_text(errors="replace"))
        return [] if not found or found[-1] == "none" else [int(t) for t in found[-1][1:-1].split(",")]

    def first_time(self, text: str) -> float | None:
        """Epoch seconds of the first log line containing ``text``."""
        for line in self.log.read_text(errors="replace").splitlines():
            match = LOG_TIME.match(line)
            if match and text in line:
                return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


def output_times(servers: str, topic: str) -> dict[int, list[float]]:
    """Task -> the epoch seconds of its outputs, in order."""
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    ends = consumer.end_offsets(parts)
    times: dict[int, list[float]] = {}
    while any(consumer.position(tp) < ends[tp] for tp in parts):
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                task_id = dict(record.headers)[ID_HEADER].decode().split(":", 1)[0]
                times.setdefault(int(task_id.removeprefix("Partition ")), []).append(record.timestamp / 1000)
    consumer.close()
    return {task: sorted(ts) for task, ts in times.items()}


def first_after(times: list[float], moment: float) -> float | None:
    return next((t for t in times if t > moment), None)


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start <= t <= end]
    return max((b - a for a, b in zip(inside, inside[1:], strict=False)), default=0.0)


class Scenario:
    """One job of three members (plus a fourth that joins later), on the dev broker."""

    def __init__(
        self, workdir: Path, servers: str, name: str, session_ms: int, extra: dict[str, str]
    ) -> None:
        self.workdir, self.servers, self.name = workdir, servers, name
        self.output = f"{name}-out"
        with TopicAdmin(servers) as admin:
            admin.ensure_topic(f"{name}-in", TASKS)
            admin.ensure_topic(self.output, TASKS)
        self.props = {
            "job.name": name,
            "job.coordinator.factory": "group",
            "job.coordinator.session.timeout.ms": str(session_ms),
            "task.class": "benchmarks.rebalance_task:CountAndEmit",
            "task.inputs": f"kafka.{name}-in",
            "task.commit.ms": "1000",
            "app.output": self.output,
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.changelog": f"kafka.{name}-counts-changelog",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            **extra,
        }
        self.members: dict[str, Member] = {}

    def start(self, member: str) -> Member:
        props = {**self.props, "job.logged.store.base.dir": str(self.workdir / f"{self.name}-{member}")}
        config = write_properties(self.workdir / f"{self.name}-{member}.properties", props)
        self.members[member] = Member(config, self.workdir / f"{self.name}-{member}.log")
        return self.members[member]

    def covered(self, names: str) -> bool:
        held = sorted(t for m in names for t in self.members[m].running())
        return held == list(range(TASKS))

    def stop(self) -> None:
        for member in self.members.values():
            member.stop()


def measure_kill(scenario: Scenario, result: Result, label: str, session_s: float) -> dict[str, float]:
    """Kill -9 member c; returns the kill time, its tasks' move time and the stayers' gaps."""
    for member in "abc":
        scenario.start(member)
    wait_until(
        lambda: scenario.covered("abc") and all(scenario.members[m].running() for m in "abc"), 120, "a, b, c"
    )
    time.sleep(4)  # steady state: the baseline gaps
    moved = scenario.members["c"].running()
    stayers = scenario.members["a"].running() + scenario.members["b"].running()
    killed_at = time.time()
    scenario.members["c"].process.kill()
    scenario.members["c"].process.wait()
    wait_until(lambda: scenario.covered("ab"), 120, "a and b to take c's tasks")
    time.sleep(3)
    return {"killed_at": killed_at, "moved": moved, "stayers": stayers, "session_s": session_s}


def report_kill(times: dict[int, list[float]], kill: dict, result: Result, label: str) -> None:
    killed_at = kill["killed_at"]
    firsts = [first_after(times.get(t, []), killed_at) for t in kill["moved"]]
    if None in firsts:
        result.note(f"{label}: a moved task produced no output after the kill")
        return
    elsewhere = max(firsts) - killed_at
    result.add(f"kill -9 -> processing elsewhere ({label})", elsewhere, "s")
    result.add(f"  of which the session timeout ({label})", kill["session_s"], "s")
    result.add(f"  after the session expired ({label})", elsewhere - kill["session_s"], "s")
    before = max(longest_gap(times[t], killed_at - 3, killed_at) for t in kill["stayers"])
    during = max(longest_gap(times[t], killed_at, killed_at + elsewhere + 1) for t in kill["stayers"])
    result.add(f"longest gap of unaffected tasks, 3 s before ({label})", before * 1000, "ms")
    result.add(
        f"longest gap of unaffected tasks, during ({label})",
        during * 1000,
        "ms",
        limit=("before", before * 1000),
    )


def main() -> None:
    args = arguments(__doc__, session_ms=(6000, 6000, 10000), rate=(500, 1000, 2000))
    session_s = args.session_ms / 1000
    result = Result("rebalance")
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as tmp:
        workdir = Path(tmp)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=workdir / "broker")
        servers = f"127.0.0.1:{info.port}"
        try:
            for label, extra in (
                ("no standby", {}),
                ("warm standby", {"job.standbytasks.replication.factor": "2"}),
            ):
                name = "rebal-cold" if not extra else "rebal-warm"
                scenario = Scenario(workdir, servers, name, args.session_ms, extra)
                producer = SteadyProducer(servers, f"{name}-in", args.rate)
                try:
                    kill = measure_kill(scenario, result, label, session_s)
                    join = measure_join(scenario) if not extra else None
                finally:
                    producer.stop()
                    scenario.stop()
                times = output_times(servers, scenario.output)
                report_kill(times, kill, result, label)
                if join is not None:
                    report_join(times, join, result)
        finally:
            dev_broker.stop(workdir / "broker")
    result.note(
        f"session timeout {args.session_ms} ms, input {args.rate} msg/s over {KEYS} keys, {TASKS} tasks, "
        "commit every 1 s; the dev broker answers a join only after about half the session timeout"
    )
    result.write(args.result)


def measure_join(scenario: Scenario) -> dict:
    """Start member d next to a and b; returns when it started, was given tasks (its first
    claim) and processed each (its log), and the tasks that stayed on a and b."""
    stayers_before = {m: scenario.members[m].running() for m in "ab"}
    member = scenario.start("d")
    wait_until(lambda: scenario.covered("abd") and member.running(), 120, "d to take its share")
    time.sleep(3)
    processing = [member.first_time(f"Partition {t}: restored in") for t in member.running()]
    stayers = [t for m in "ab" for t in stayers_before[m] if t in scenario.members[m].running()]
    return {
        "started": member.started,
        "assigned": member.first_time("owned with generation"),
        "processing": processing,
        "stayers": stayers,
    }


def report_join(times: dict[int, list[float]], join: dict, result: Result) -> None:
    started = join["started"]
    if None in join["processing"] or join["assigned"] is None:
        result.note("join: the new member's log does not show when it got or started its tasks")
        return
    done = max(join["processing"])
    result.add("new member: start -> its share processing", done - started, "s")
    result.add("  of which start -> first tasks assigned", join["assigned"] - started, "s")
    during = max(longest_gap(times[t], started, done + 1) for t in join["stayers"])
    before = max(longest_gap(times[t], started - 3, started) for t in join["stayers"])
    result.add(
        "longest gap of tasks that stayed, during the join",
        during * 1000,
        "ms",
        limit=("before", before * 1000),
    )


if __name__ == "__main__":
    main()

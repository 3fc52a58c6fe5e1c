"""What the benchmark scripts share: sizes, result rows, and timing a child process.

A benchmark script takes ``--size`` and ``--result FILE`` and writes
``{"name", "rows": [{"what", "value", "unit", "ratio", "ratio_to", "rss_mb", "cpu_us"}], "notes"}``
to FILE; ``ratio`` is ``value`` over the raw limit named by ``ratio_to``, measured in the same
run; ``rss_mb`` is the peak RSS of the process the row measures, when it is a child process;
``cpu_us`` the CPU time (user + system, every thread) that process spent per message or record
of the measured phase. A rate moves with whatever else the machine runs; CPU per message
moves much less, so the two together show what a noisy run can and cannot say.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIZES = ("tiny", "small", "full")


@dataclass
class Result:
    """The rows one benchmark reports."""

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(
        self,
        what: str,
        value: float,
        unit: str,
        *,
        limit: tuple[str, float] | None = None,
        rss_mb: float | None = None,
        cpu_us: float | None = None,
    ) -> None:
        """Add a row; ``limit`` is (name, value) of the raw limit it is compared with;
        ``cpu_us`` the measured process's CPU microseconds per message."""
        ratio = None if limit is None or not limit[1] else value / limit[1]
        self.rows.append(
            {
                "what": what,
                "value": value,
                "unit": unit,
                "ratio": ratio,
                "ratio_to": None if limit is None else limit[0],
                "rss_mb": rss_mb,
                "cpu_us": cpu_us,
            }
        )

    def note(self, text: str) -> None:
        """A line printed under the table (what was measured, what could not be)."""
        self.notes.append(text)
        print(text, flush=True)

    def write(self, path: str | None) -> None:
        """Print the rows, and write them as JSON to ``path`` when given."""
        for row in self.rows:
            ratio = "" if row["ratio"] is None else f"  {row['ratio']:.2f} x {row['ratio_to']}"
            rss = "" if row["rss_mb"] is None else f"  {row['rss_mb']:.0f} MB"
            cpu = "" if row.get("cpu_us") is None else f"  {row['cpu_us']:.1f} us CPU/msg"
            print(f"{row['what']:<48} {row['value']:>12,.1f} {row['unit']}{ratio}{rss}{cpu}", flush=True)
        if path:
            Path(path).write_text(json.dumps({"name": self.name, "rows": self.rows, "notes": self.notes}))


def arguments(description: str | None, **defaults: Any) -> argparse.Namespace:
    """``--size`` and ``--result``; ``defaults`` maps extra option names to per-size tuples
    (tiny, small, full) or to single values."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--result", help="write the rows as JSON to this file")
    for name, value in defaults.items():
        kind = type(value[0]) if isinstance(value, tuple) else type(value)
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None)
    args = parser.parse_args()
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value[SIZES.index(args.size)] if isinstance(value, tuple) else value)
    return args


@dataclass
class Run:
    """A finished child process: when it got ready, how long it ran, its peak RSS, its CPU."""

    ready_s: float
    total_s: float
    rss_mb: float
    stdout: str
    cpu_s: float = 0.0
    ready_cpu_s: float = 0.0
    started: float = 0.0  # time.perf_counter() when it was started

    @property
    def busy_s(self) -> float:
        """Seconds from ready to exit."""
        return self.total_s - self.ready_s

    @property
    def busy_cpu_s(self) -> float:
        """CPU seconds (user + system) the process spent from ready to exit."""
        return self.cpu_s - self.ready_cpu_s


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) process ``pid`` has used so far; ``None`` once
    it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # utime and stime are fields 14 and 15 of stat(5); [0] here is field 3 (state).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(
    command: list[str],
    ready_marker: str | None = "starts at offset",
    timeout_s: float | None = None,
    *,
    tree_cpu: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_line: Callable[[str, float], None] | None = None,
    **kwargs: Any,
) -> Run:
    """Run ``command`` to its end; the peak RSS is its own (:class:`_PeakRss`; not its
    children's), the ready time from the first stderr line that contains ``ready_marker``, the
    CPU time from ``wait4`` and, at that line, from ``/proc`` (of its whole tree with ``tree_cpu``).
    ``on_start(pid)`` is called once it runs, ``on_line(line, time.perf_counter())`` for each
    stderr line as it comes.
    Raises SystemExit with its error lines when it fails or is killed after ``timeout_s``."""
    started = time.perf_counter()
    ready = None
    ready_cpu = 0.0
    errors: list[str] = []
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=out, text=True, cwd=ROOT, **kwargs)
        assert process.stderr is not None
        if on_start is not None:
            on_start(process.pid)
        peak = _PeakRss(process.pid)
        watcher = threading.Thread(target=peak.watch, daemon=True)
        watcher.start()
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            process.kill()

        killer = threading.Timer(timeout_s, kill) if timeout_s else None
        if killer:
            killer.start()
        for line in process.stderr:
            if on_line is not None:
                on_line(line, time.perf_counter())
            if ready is None and ready_marker and ready_marker in line:
                ready = time.perf_counter() - started
                # tree_cpu: a parent's members too (their CPU reaches wait4 once reaped)
                ready_cpu = (tree_cpu_s(process.pid) if tree_cpu else process_cpu_s(process.pid)) or 0.0
            if "ERROR" in line or "Error" in line or "Traceback" in line:
                errors.append(line)
        _, status, usage = os.wait4(process.pid, 0)
        watcher.join()
        if killer:
            killer.cancel()
        out.seek(0)
        stdout = out.read()
    process.returncode = os.waitstatus_to_exitcode(status)
    total = time.perf_counter() - started
    if process.returncode != 0:
        sys.stderr.write("".join(errors[-20:]))
        if timed_out.is_set():
            what = f"killed after {timeout_s:.0f} s"
        elif process.returncode == -9:
            what = "killed by SIGKILL (the kernel's OOM killer, if a memory limit applies)"
        else:
            what = "failed"
        last = errors[-1].strip() if errors else "no error line"
        program = Path(command[1]).name if len(command) > 1 else command[0]
        msg = f"{program} {what} (exit code {process.returncode}): {last}"
        raise SystemExit(msg)
    cpu = usage.ru_utime + usage.ru_stime
    return Run(ready or 0.0, total, peak.mb, stdout, cpu, ready_cpu, started)


class _PeakRss:
    """The peak RSS of one process (``VmHWM``, read every 50 ms until it exits).

    Not ``wait4``'s ``ru_maxrss``: Linux keeps the high-water mark of the memory a process had
    before ``exec``, which for a forked child is its parent's, so a benchmark script that had
    produced a large topic made its job look as large (a ``python -c pass`` child of a
    500 MB parent reports 511 MB)."""

    def __init__(self, pid: int) -> None:
        self.status = Path(f"/proc/{pid}/status")
        self.kb = 0

    def watch(self) -> None:
        while True:
            try:
                text = self.status.read_text()
            except OSError:  # exited (and reaped)
                return
            for line in text.splitlines():
                if line.startswith("VmHWM:"):
                    self.kb = max(self.kb, int(line.split()[1]))
            if "State:\tZ" in text:  # exited, not yet reaped: VmHWM is gone from now on
                return
            time.sleep(0.05)

    @property
    def mb(self) -> float:
        return self.kb / 1024


def samzapy_run(config: Path, *extra: str) -> list[str]:
    """The command line of ``samzapy run CONFIG --exit-at-end``."""
    return [sys.executable, "-m", "samzapy", "run", str(config), "--exit-at-end", *extra]


def write_properties(path: Path, props: dict[str, str]) -> Path:
    """Write ``props`` as a properties file."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds used so far by process ``pid`` (default: this one) and every live
    descendant: for a Spark job, the driver, the JVM it started and the JVM's Python workers.
    A descendant that has exited is counted only once reaped by its parent."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, pending = 0.0, [root]
    while pending:
        current = pending.pop()
        used = process_cpu_s(current)
        if current == root and pid is None:
            times = os.times()  # this process and its reaped children
            used = times.user + times.system + times.children_user + times.children_system
        total += used or 0.0
        pending.extend(children.get(current, []))
    return total


@dataclass(frozen=True)
class Consumed:
    """A bare read of a topic: records, wall seconds, CPU seconds of this process."""

    records: int
    seconds: float
    cpu_s: float

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds

    @property
    def cpu_us(self) -> float:
        """CPU microseconds per record."""
        return self.cpu_s / max(self.records, 1) * 1e6


def raw_consume(servers: str, topic: str, partitions: int, *, c_decoder: bool) -> Consumed:
    """Read every partition of ``topic`` to its end with a bare consumer.
    ``c_decoder=False`` is stock kafka-python (the raw limit of the issue's ratios); ``True``
    adds samzapy's C batch decoder, which every samzapy consumer uses."""
    from kafka import TopicPartition

    from samzapy.kafka.reading import read_partition, reader_consumer

    consumer = reader_consumer(servers, c_decoder=c_decoder)
    started, cpu_started = time.perf_counter(), time.process_time()
    reads = (read_partition(consumer, TopicPartition(topic, p), 0) for p in range(partitions))
    count = sum(len(batch) for read in reads for batch in read)
    consumed = Consumed(count, time.perf_counter() - started, time.process_time() - cpu_started)
    consumer.close()
    return consumed


def count_records(servers: str, topic: str) -> int:
    """Records in every partition of ``topic`` (read to the true end)."""
    from kafka import TopicPartition

    from samzapy.kafka.reading import read_partition, reader_consumer

    consumer = reader_consumer(servers)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        return sum(len(b) for p in partitions for b in read_partition(consumer, TopicPartition(topic, p), 0))
    finally:
        consumer.close()


def processed_messages(snapshot: dict[str, dict[str, Any]]) -> int:
    """Messages the tasks of a ``--metrics-file`` snapshot processed (their sum)."""
    return sum(g.get("messages-actually-processed", 0) for n, g in snapshot.items() if n.startswith("task."))

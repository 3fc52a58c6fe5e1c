"""Where a process tree's wall time goes during a run: on a CPU, waiting for one, or asleep.

A process that used 0.6 of a core over a run was not necessarily waiting on I/O: on a shared
machine it may have been runnable the whole time and waited in the kernel's run queue for a
core another program held. Linux reports both per thread in ``/proc/<pid>/task/<tid>/schedstat``
(nanoseconds on a CPU, nanoseconds runnable but waiting); :class:`TreeSampler` reads them every
:data:`PERIOD_S` for a process, its descendants and any other processes named (the dev broker),
together with the machine's busy and idle time from ``/proc/stat``, so that a window of the run
(e.g. while every member of a group processed) can be summed up afterwards with
:meth:`TreeSampler.usage`.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._common import process_cpu_s

#: Seconds between two samples.
PERIOD_S = 0.1
#: Samples between two looks for new descendants (a scan of all of /proc).
RESCAN_EVERY = 5


@dataclass(frozen=True)
class Usage:
    """One process over a window: cores it ran on and cores' worth it waited for a CPU.

    ``cpu`` and ``runq`` are seconds per second of the window, summed over its threads, so a
    single-threaded process that was runnable throughout has ``cpu + runq`` = 1.0.
    """

    cpu: float
    runq: float


@dataclass(frozen=True)
class Machine:
    """The whole machine over a window, in cores: busy (user, nice, system, irq, softirq),
    idle (idle and iowait), and stolen by the hypervisor."""

    busy: float
    idle: float
    steal: float


@dataclass
class _Sample:
    t: float
    procs: dict[int, tuple[float, float]]
    machine: tuple[int, int, int]


def schedstat(pid: int) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable waiting for one) of ``pid`` so far; ``None`` once
    it is gone.

    The CPU time is the process's own (``/proc/<pid>/stat``: every thread, those that have
    exited too); the wait is summed over its live threads (Linux keeps no total for the
    exited ones: a thread that ends inside a window takes its wait out of the sum).
    """
    cpu = process_cpu_s(pid)
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    wait = 0
    for task in tasks:
        try:
            wait += int((task / "schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return None if cpu is None else (cpu, wait / 1e9)


def machine_ticks() -> tuple[int, int, int]:
    """(busy, idle, steal) clock ticks of all CPUs so far, from ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return user + nice + system + irq + softirq, idle + iowait, steal


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, pending = [], [root]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


@dataclass
class TreeSampler:
    """Samples a process tree (rooted at the pid given to :meth:`start`) and ``others``
    (name -> pid) in a thread of this process until :meth:`stop`; not reusable."""

    others: dict[str, int] = field(default_factory=dict)
    _samples: list[_Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    root: int | None = None

    def start(self, root: int) -> None:
        """Start sampling ``root``'s tree (call it once the root process exists)."""
        self.root = root
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (takes a last sample first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        assert self.root is not None
        pids = [self.root]
        count = 0
        while True:
            if count % RESCAN_EVERY == 0:
                pids = descendants(self.root)
            count += 1
            procs = {}
            for pid in [*pids, *self.others.values()]:
                used = schedstat(pid)
                if used is not None:
                    procs[pid] = used
            self._samples.append(_Sample(time.perf_counter(), procs, machine_ticks()))
            if self._stop.wait(PERIOD_S):
                return

    def pids(self) -> list[int]:
        """Every process of the tree seen (in order of pid), the root first."""
        seen = {pid for s in self._samples for pid in s.procs} - set(self.others.values())
        return sorted(seen, key=lambda pid: (pid != self.root, pid))

    def _around(self, t0: float, t1: float) -> tuple[_Sample, _Sample]:
        """The samples nearest to ``t0`` and ``t1`` (``time.perf_counter`` values)."""
        first = min(self._samples, key=lambda s: abs(s.t - t0))
        last = min(self._samples, key=lambda s: abs(s.t - t1))
        if last.t <= first.t:
            msg = f"no two samples span the window {t0:.2f}-{t1:.2f} (samples every {PERIOD_S} s)"
            raise ValueError(msg)
        return first, last

    def usage(self, t0: float, t1: float) -> tuple[dict[int, Usage], Machine]:
        """Each process seen alive at both ends of the window ``t0``-``t1``, and the machine."""
        first, last = self._around(t0, t1)
        span = last.t - first.t
        per = {
            pid: Usage((last.procs[pid][0] - a[0]) / span, (last.procs[pid][1] - a[1]) / span)
            for pid, a in first.procs.items()
            if pid in last.procs
        }
        ticks = [b - a for a, b in zip(first.machine, last.machine, strict=True)]
        cores = (os.cpu_count() or 1) / max(sum(ticks), 1)
        return per, Machine(ticks[0] * cores, ticks[1] * cores, ticks[2] * cores)


def wait_until_idle(cores: float, limit_s: float) -> tuple[float, float]:
    """Wait until a whole second passes in which the machine's busy time is under ``cores``
    (other programs have stopped competing for the CPUs), or ``limit_s`` seconds.

    Returns (seconds waited, busy cores in the last second looked at).
    """
    started = time.perf_counter()
    while True:
        before = machine_ticks()
        time.sleep(1.0)
        after = machine_ticks()
        ticks = [b - a for a, b in zip(before, after, strict=True)]
        busy = ticks[0] * (os.cpu_count() or 1) / max(sum(ticks), 1)
        waited = time.perf_counter() - started
        if busy < cores or waited >= limit_s:
            return waited, busy

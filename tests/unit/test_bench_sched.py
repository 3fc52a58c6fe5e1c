"""The benchmarks' tree sampler: a process tree's CPU and run-queue wait, from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks._sched import TreeSampler

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

#: A parent that starts a child busy for 2 s and waits for it (its own CPU is ~0).
BUSY = "import time\\nend = time.time() + 2\\nwhile time.time() < end: pass"
TREE = f"import subprocess, sys; subprocess.run([sys.executable, '-c', '{BUSY}'])"


def test_sampler_finds_the_tree_and_splits_its_time() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    sampler = TreeSampler(others={"sleeper": sleeper.pid})
    root = subprocess.Popen([sys.executable, "-c", TREE])
    sampler.start(root.pid)
    time.sleep(0.7)  # the busy child has started and the sampler has seen it (it looks every 0.5 s)
    window = (time.perf_counter(), time.perf_counter() + 0.5)
    root.wait()
    sampler.stop()
    sleeper.kill()
    sleeper.wait()

    pids = sampler.pids()
    assert pids[0] == root.pid
    assert sleeper.pid not in pids  # named others are not part of the tree
    assert len(pids) == 2
    per, machine = sampler.usage(*window)
    child = per[pids[1]]
    # runnable throughout: on a CPU or waiting for one (whatever else the machine runs)
    assert child.cpu + child.runq > 0.7
    assert per[root.pid].cpu < 0.2  # waiting on its child: asleep
    assert per[sleeper.pid].cpu < 0.2
    assert machine.busy + machine.idle + machine.steal == pytest.approx(os.cpu_count(), rel=0.05)

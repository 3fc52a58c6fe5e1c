"""Which stores take their local RocksDB checkpoint at a commit (commit step 5).

A local checkpoint (``stores/checkpoints.py``) flushes the store's memtable and hard-links its
files: ~5 ms alone, more under load, and input waits while a commit takes them. The ad-click
join has 16 stores (4 tasks x 4): all of them at one commit stopped input for ~100 ms.

A store with ``stores.<store>.local.checkpoint.ms`` = 0 (the default) takes one at every
commit, as before. The others take one once their interval has passed, and the schedule
spreads them over commits: first deadlines are staggered over the first interval, and a
routine commit takes at most :attr:`LocalCheckpointSchedule.budget` of the due ones (most
overdue first; the rest wait for the next commit). A final commit takes every store's.

The schedule only chooses: the commit (:class:`samzapy.container.commit.Commit`) reads the
changelog offsets and takes the checkpoints it chose.

Correctness does not depend on the schedule: the Kafka checkpoint records every store's
changelog offset at every commit, and a restore starts from any local checkpoint at or below
it and replays the changelog from there (``stores/restore.py``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samzapy.container.task_instance import TaskInstance

#: How many times the expected number of due checkpoints per commit a routine commit may take
#: (slack for commits that come later than ``task.commit.ms``).
BUDGET_SLACK = 1.25


class LocalCheckpointSchedule:
    """Decides, commit by commit, which stores of which tasks take a local checkpoint.

    Args:
        intervals_ms: ``stores.<store>.local.checkpoint.ms`` by store name (a store missing
            here counts as 0: a checkpoint at every commit).
        commit_ms: ``task.commit.ms``, to size the per-commit budget.

    Not thread-safe: the container's loop owns it.
    """

    def __init__(self, intervals_ms: dict[str, int], commit_ms: int) -> None:
        self._intervals_s = {name: ms / 1000 for name, ms in intervals_ms.items()}
        self._commit_s = max(commit_ms, 1) / 1000
        self._next: dict[tuple[str, str], float] = {}  # (task, store) -> when it is due
        self.budget: int | None = None  # set at the first commit, when the stores are known

    def choose(self, tasks: list[TaskInstance], *, final: bool, now: float) -> list[tuple[TaskInstance, str]]:
        """The (task, store name) pairs that take a local checkpoint at a commit at ``now``."""
        if self.budget is None:
            self._start(tasks, now)
        chosen: list[tuple[TaskInstance, str]] = []
        due: list[tuple[float, str, TaskInstance, str]] = []
        for task in tasks:
            for name in task.stores:
                interval = self._intervals_s.get(name, 0.0)
                key = (task.task_name, name)
                if final or interval <= 0:
                    chosen.append((task, name))
                    self._next[key] = now + interval
                    continue
                next_at = self._next.setdefault(key, now + interval)  # a store new since start
                if now >= next_at:
                    due.append((next_at, task.task_name, task, name))
        due.sort(key=lambda item: (item[0], item[1], item[3]))
        for _, task_name, task, name in due[: self.budget]:
            chosen.append((task, name))
            self._next[(task_name, name)] = now + self._intervals_s[name]
        return chosen

    def _start(self, tasks: list[TaskInstance], now: float) -> None:
        """Stagger the first deadlines over each store's first interval; size the budget."""
        spaced = [
            (t.task_name, name) for t in tasks for name in t.stores if self._intervals_s.get(name, 0.0) > 0
        ]
        for index, key in enumerate(spaced):
            interval = self._intervals_s[key[1]]
            self._next[key] = now + interval * (index + 1) / (len(spaced) + 1)
        expected = sum(self._commit_s / self._intervals_s[name] for _, name in spaced)
        self.budget = max(1, math.ceil(round(BUDGET_SLACK * expected, 6)))  # 2.0000000001 is 2

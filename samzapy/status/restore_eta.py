"""How much restore is left: per task, for this container, and for the whole job.

A store's restore publishes its target (the changelog records it replays) and its progress
(``restore-target-records``, ``restore-replayed-records``) once it begins. A container
restores its tasks' stores one after another, so while one task replays, the others wait
without a target. Counting only the task replaying now made the ETA jump back at every task;
here each waiting task counts as the mean target of this container's tasks that have one (the
partitions of one job hold similar state) and the summary says how many were estimated so.
The rate is the container's replay rate over the last samples, finished stores included (the
next task has not sped up yet when the last one ends). The job's ETA is the largest of its
containers' (they restore in parallel); unknown while any restoring container's is.

>>> progress = {"Partition 0": TaskRestore(1000, 400, True), "Partition 1": TaskRestore(0, 0, False)}
>>> container_restore(["Partition 0", "Partition 1"], progress, rate=100.0)
{'tasks_left': 2, 'records_left': 1600, 'estimated_tasks': 1, 'records_per_s': 100.0, 'eta_s': 16.0}
>>> job_restore([{"tasks_left": 2, "eta_s": 16.0, "records_left": 1600, "estimated_tasks": 1}, None])
{'containers_restoring': 1, 'tasks_left': 2, 'records_left': 1600, 'estimated_tasks': 1, 'eta_s': 16.0}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast


@dataclass(frozen=True)
class TaskRestore:
    """What a task's stores say of their restore.

    Records to replay, replayed so far, and whether any store has begun (``False``: no target
    known yet).
    """

    target: float
    replayed: float
    begun: bool

    @property
    def left(self) -> float:
        """Records still to replay (0 once done)."""
        return max(self.target - self.replayed, 0.0)


def task_restore(store_metrics: Iterable[Mapping[str, Any]]) -> TaskRestore:
    """The restore of one task from its stores' metrics (``restore-*-records`` gauges)."""
    target = replayed = 0.0
    begun = False
    for found in store_metrics:
        if "restore-target-records" in found:
            begun = True
            target += _number(found.get("restore-target-records"))
            replayed += _number(found.get("restore-replayed-records"))
    return TaskRestore(target, replayed, begun)


def container_restore(
    restoring: list[str], progress: Mapping[str, TaskRestore], rate: float
) -> dict[str, Any] | None:
    """This container's remaining restore over the tasks in ``restoring`` (module doc).

    ``None`` when no task restores. ``progress`` holds every task's, finished ones included
    (their targets estimate the waiting tasks'); ``rate``: records replayed per second.
    """
    if not restoring:
        return None
    known = [p.target for p in progress.values() if p.begun]
    waiting = [name for name in restoring if not progress[name].begun]
    left = sum(progress[name].left for name in restoring if progress[name].begun)
    mean = sum(known) / len(known) if known else None
    if waiting and mean is not None:
        left += mean * len(waiting)
    known_left = not waiting or mean is not None
    return {
        "tasks_left": len(restoring),
        "records_left": round(left) if known_left else None,
        "estimated_tasks": len(waiting),
        "records_per_s": round(rate, 1),
        "eta_s": round(left / rate, 1) if known_left and rate > 0 else None,
    }


def job_restore(containers: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The job's remaining restore from its containers' (``None``: not restoring or not known).

    Its ETA is the largest (module doc). ``None`` when no container restores.
    """
    restoring = [c for c in containers if c]
    if not restoring:
        return None
    etas = [c.get("eta_s") for c in restoring]
    lefts = [c.get("records_left") for c in restoring]
    return {
        "containers_restoring": len(restoring),
        "tasks_left": sum(c.get("tasks_left", 0) for c in restoring),
        "records_left": None if None in lefts else sum(lefts),
        "estimated_tasks": sum(c.get("estimated_tasks", 0) for c in restoring),
        "eta_s": None if None in etas else max(cast("list[float]", etas)),
    }


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

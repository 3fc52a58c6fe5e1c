"""Which container runs which task: the one place that knows the static assignment.

With ``job.container.count=N`` (the passthrough coordinator, DESIGN §9), container ``I`` runs
the tasks whose partition number ``p`` has ``p % N == I``, and keeps standby copies of the
tasks of the ``R-1`` containers before it (``job.standbytasks.replication.factor=R``). The run
loop, the query service (to find the container that answers for a key) and the standbys all
ask here, so that a change of scheme is made once.
"""

from __future__ import annotations


def owner_of(partition: int, container_count: int) -> int:
    """The container that runs task ``partition``.

    >>> owner_of(5, 2), owner_of(5, 1)
    (1, 0)
    """
    return partition % container_count


def tasks_of(container_id: int, container_count: int, task_count: int) -> list[int]:
    """The tasks (partition numbers) container ``container_id`` runs, in order.

    >>> tasks_of(0, 2, 5), tasks_of(1, 2, 5), tasks_of(0, 1, 3)
    ([0, 2, 4], [1, 3], [0, 1, 2])
    """
    return [p for p in range(task_count) if owner_of(p, container_count) == container_id]


def other_containers(container_id: int, container_count: int) -> list[int]:
    """Every container of the job but ``container_id``.

    >>> other_containers(1, 3), other_containers(0, 1)
    ([0, 2], [])
    """
    return [c for c in range(container_count) if c != container_id]


def standby_tasks_of(
    container_id: int, container_count: int, task_count: int, replication_factor: int
) -> list[int]:
    """The tasks (partition numbers) container ``container_id`` keeps standby copies of.

    Container ``I`` stands by for the tasks of containers ``I-1 .. I-(R-1)`` (mod ``N``), so
    that the ``R`` copies of a task are on ``R`` different containers.

    >>> standby_tasks_of(0, 2, 4, 2), standby_tasks_of(1, 2, 4, 2)
    ([1, 3], [0, 2])
    >>> standby_tasks_of(0, 3, 6, 2), standby_tasks_of(0, 3, 6, 3)
    ([2, 5], [1, 2, 4, 5])
    >>> standby_tasks_of(0, 1, 4, 1), standby_tasks_of(0, 2, 4, 1)
    ([], [])
    """
    if container_count <= 1 or replication_factor <= 1:
        return []
    owners = {
        (container_id - j) % container_count for j in range(1, min(replication_factor, container_count))
    }
    return [p for p in range(task_count) if owner_of(p, container_count) in owners]

"""Which tasks a container's query service answers for, and whom it asks for the others.

Two placements, one per coordination mode:

- :class:`StaticPlacement` (``passthrough``): container ``I`` of ``N`` runs the tasks with
  ``p % N == I``; another task's owner is a container id, found through the directory topic;
- :class:`GroupPlacement` (``group``): the member runs what the group gave it, now; another
  task's owner is the query URL the leader put in the assignment's task -> endpoint map.
"""

from __future__ import annotations

from typing import Any, Protocol

from samzapy.container.assignment import other_containers, owner_of, tasks_of

#: An owner: a container id (asked through the directory) or a URL (asked directly).
Owner = int | str


class Placement(Protocol):
    """Where the job's tasks run, as one container's query service sees it."""

    def mine(self) -> list[int]:
        """The tasks (partitions) this container answers for, now."""

    def owner(self, partition: int) -> Owner | None:
        """Who runs task ``partition`` when this container does not; ``None`` if unknown."""

    def others(self) -> list[Owner]:
        """Every other owner (a range asks each of them)."""


class StaticPlacement:
    """``job.container.count`` containers, task ``p`` on container ``p % N``."""

    def __init__(self, container_id: int, container_count: int, task_count: int) -> None:
        self._id, self._count = container_id, container_count
        self._mine = tasks_of(container_id, container_count, task_count)

    def mine(self) -> list[int]:
        """The tasks ``p % N == I``."""
        return self._mine

    def owner(self, partition: int) -> Owner | None:
        """The container ``partition % N``."""
        return owner_of(partition, self._count)

    def others(self) -> list[Owner]:
        """Every other container id."""
        return list(other_containers(self._id, self._count))


class GroupPlacement:
    """A group member: its tasks are those it runs now; the others' owners are the URLs of the
    latest assignment (``group`` is the container's
    :class:`~samzapy.container.group_tasks.GroupTasks`)."""

    def __init__(self, group: Any, tasks: Any, own_url: str) -> None:
        self._group = group
        self._tasks = tasks
        self._own_url = own_url

    def mine(self) -> list[int]:
        """The tasks this member runs or restores now."""
        return sorted({t.partition for t in self._tasks()} | set(self._group.restoring()))

    def _endpoints(self) -> dict[int, str]:
        assignment = self._group.assignment
        return {} if assignment is None else dict(assignment.endpoints)

    def owner(self, partition: int) -> Owner | None:
        """The URL the assignment names for ``partition`` (``None``: no member announced one)."""
        url = self._endpoints().get(partition)
        return None if url is None or url == self._own_url else url

    def others(self) -> list[Owner]:
        """The other members' URLs in the assignment."""
        return sorted({u for u in self._endpoints().values() if u != self._own_url})

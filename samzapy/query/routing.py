"""Which tasks a container's query service answers for, and whom it asks for the others.

Two placements, one per coordination mode:

- :class:`StaticPlacement` (``passthrough``): container ``I`` of ``N`` runs the tasks with
  ``p % N == I``; another task's owner is a container id, found through the directory topic;
- :class:`GroupPlacement` (``group``): the member runs what the group gave it, now; another
  task's owner is the query URL the leader put in the assignment's task -> endpoint map.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from samzapy.container.assignment import other_containers, owner_of, tasks_of
from samzapy.container.task_states import ACTIVE, TaskState, Transition
from samzapy.coordinator.assignor import TaskAssignment

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
    """A group member.

    Its tasks are those it restores or runs now, as the container's task manager tells it (a
    listener: :meth:`tasks_changed`); the others' owners are the URLs of the latest assignment
    (``assignment`` returns it, ``None`` before the first).

    Thread-safe: the set of this member's tasks is replaced whole at every change.
    """

    def __init__(self, assignment: Callable[[], TaskAssignment | None], own_url: str) -> None:
        self._assignment = assignment
        self._own_url = own_url
        self._mine: frozenset[int] = frozenset()

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """A task restoring or running here is this member's; one closed here is not."""
        mine = set(self._mine)
        for change in changes:
            if change.after in (TaskState.RESTORING, TaskState.RUNNING):
                mine.add(change.task.partition)
            elif change.after is TaskState.CLOSED and change.before in ACTIVE:
                mine.discard(change.task.partition)
        self._mine = frozenset(mine)

    def mine(self) -> list[int]:
        """The tasks this member runs or restores now."""
        return sorted(self._mine)

    def _endpoints(self) -> dict[int, str]:
        assignment = self._assignment()
        return {} if assignment is None else dict(assignment.endpoints)

    def owner(self, partition: int) -> Owner | None:
        """The URL the assignment names for ``partition`` (``None``: no member announced one)."""
        url = self._endpoints().get(partition)
        return None if url is None or url == self._own_url else url

    def others(self) -> list[Owner]:
        """The other members' URLs in the assignment."""
        return sorted({u for u in self._endpoints().values() if u != self._own_url})

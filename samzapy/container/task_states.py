"""A task's life as a state machine, and the record the container keeps of each task.

Kafka Streams' ``Task.State``, with samzapy's standby and warm-up states: the one table of which
moves are legal.

::

    CREATED ──> RESTORING ──> RUNNING ──> SUSPENDED ──> CLOSED
       │  │         ▲   │                    │  ▲
       │  │         │   └────────────────────┼──┘ (revoked or lost while restoring)
       │  └─> STANDBY ──────────────────────────> CLOSED
       └────> WARMING_UP ───────────────────────> CLOSED
                    (STANDBY and WARMING_UP promote to RESTORING)
    SUSPENDED ──> RUNNING (resumed)

- **created**: known to the container, nothing built;
- **restoring**: its stores are being rebuilt (in a background thread in group mode);
- **running**: its ``TaskInstance`` exists and its inputs are read;
- **suspended**: its inputs are no longer read (committed first when it was revoked, not when
  it was lost); its stores are still open;
- **closed**: its stores are closed (kept on disk); the record is forgotten;
- **standby**: a warm copy of another owner's stores is kept here (``container/standby.py``);
- **warming up**: a copy brought within an acceptable lag before the task moves here (DESIGN
  §12, Kafka Streams' KIP-441 warm-up replicas); promoted to restoring when it is close enough.

:class:`~samzapy.container.task_manager.TaskManager` is the only code that moves a task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from samzapy.checkpoint import TaskCheckpoint
from samzapy.errors import SamzapyError
from samzapy.streams import task_name_for

if TYPE_CHECKING:
    from samzapy.container.task_instance import TaskInstance, TaskStores


class TaskState(Enum):
    """Where a task is in its life (the module docstring's diagram)."""

    CREATED = "created"
    RESTORING = "restoring"
    RUNNING = "running"
    SUSPENDED = "suspended"
    CLOSED = "closed"
    STANDBY = "standby"
    WARMING_UP = "warming up"


#: Every legal move: state -> the states it may go to.
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.CREATED: frozenset(
        {TaskState.RESTORING, TaskState.STANDBY, TaskState.WARMING_UP, TaskState.CLOSED}
    ),
    TaskState.RESTORING: frozenset({TaskState.RUNNING, TaskState.SUSPENDED, TaskState.CLOSED}),
    TaskState.RUNNING: frozenset({TaskState.SUSPENDED}),
    TaskState.SUSPENDED: frozenset({TaskState.RUNNING, TaskState.CLOSED}),
    TaskState.STANDBY: frozenset({TaskState.RESTORING, TaskState.CLOSED}),
    TaskState.WARMING_UP: frozenset({TaskState.RESTORING, TaskState.CLOSED}),
    TaskState.CLOSED: frozenset(),
}

#: The states of a task this container is the active owner of.
ACTIVE = frozenset({TaskState.CREATED, TaskState.RESTORING, TaskState.RUNNING, TaskState.SUSPENDED})


class IllegalTransition(SamzapyError):
    """A task was asked to move where its state machine does not go (a bug in the caller)."""


@dataclass(eq=False)
class ManagedTask:
    """One task as the container knows it: its partition, its state, and what it holds.

    ``checkpoint`` is the one to restore to (the claim record); ``stores`` are set once
    restored; ``instance`` once running. Only the task manager changes these.
    """

    partition: int
    state: TaskState = TaskState.CREATED
    checkpoint: TaskCheckpoint | None = None
    stores: TaskStores = field(default_factory=dict)
    instance: TaskInstance | None = None

    @property
    def name(self) -> str:
        """The task's name, ``Partition N``."""
        return task_name_for(self.partition)

    def move(self, to: TaskState) -> Transition:
        """Move to ``to``; the move made.

        Raises:
            IllegalTransition: ``to`` is not reachable from the current state.
        """
        if to not in TRANSITIONS[self.state]:
            allowed = ", ".join(sorted(s.value for s in TRANSITIONS[self.state])) or "nothing"
            msg = (
                f"{self.name}: cannot go from {self.state.value} to {to.value}; "
                f"from {self.state.value} it may go to {allowed}"
            )
            raise IllegalTransition(msg)
        before, self.state = self.state, to
        return Transition(self, before, to)


@dataclass(frozen=True)
class Transition:
    """A move one task made: what listeners are told."""

    task: ManagedTask
    before: TaskState
    after: TaskState

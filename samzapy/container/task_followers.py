"""The parts of a container that follow its tasks.

Each is a listener of the task manager (:class:`~samzapy.container.task_manager.TaskManager`):
told every batch of moves, in the order they subscribed, they start and stop what they keep per
task.

- :class:`InputsFollower`: a running task's input partitions are read from its checkpoint on;
  a suspended task's are no longer read (subscribe it first: the others read the offsets it sets);
  with async tasks, a suspended task's messages in flight are cancelled and the others' are
  finished first, since every partition is sought again at its task's offset;
- :class:`AsyncFollower`: a started async task gets its lanes and trackers;
- :class:`HeadFlushFollower`: the ``flush.at.head`` stores of running tasks;
- :class:`GaugeFollower`: the per-task and per-input gauges;
- :class:`StatusFollower`: ``/health`` and the status page's per-task states;
- :class:`StandbyFollower`: the standby replicas follow the standby set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import JobConfig
from samzapy.container.async_runner import AsyncRunner
from samzapy.container.head_flush import HeadFlusher
from samzapy.container.inputs import Inputs
from samzapy.container.loop import positions
from samzapy.container.startup import input_partitions
from samzapy.container.task_manager import TaskManager
from samzapy.container.task_states import ACTIVE, ManagedTask, TaskState, Transition
from samzapy.health import ContainerStatus
from samzapy.metrics import MetricsRegistry
from samzapy.reporters.container_metrics import (
    forget_input_gauges,
    register_input_gauges,
    register_task_gauges,
)
from samzapy.streams import SystemStream


def _started(changes: Sequence[Transition]) -> list[ManagedTask]:
    return [c.task for c in changes if c.after is TaskState.RUNNING and c.task.instance is not None]


def _suspended(changes: Sequence[Transition]) -> list[ManagedTask]:
    return [c.task for c in changes if c.after is TaskState.SUSPENDED and c.before is TaskState.RUNNING]


class InputsFollower:
    """Reads the inputs of the running tasks.

    ``inputs`` is the container's ``Inputs``; ``runner`` the ``AsyncRunner``, if the job has
    async tasks.
    """

    def __init__(
        self,
        manager: TaskManager,
        inputs: Inputs,
        job: JobConfig,
        input_counts: dict[SystemStream, int],
        runner: AsyncRunner | None = None,
    ) -> None:
        self._manager = manager
        self._inputs = inputs
        self._job = job
        self._counts = input_counts
        self._runner = runner

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """Add the started tasks' partitions (at their checkpointed offsets); drop the suspended ones'.

        Every partition is sought again at its task's offset, so an async task must hold no
        message then: its offset is the lowest one still in flight (a suspended task's are
        cancelled, the others' finished).
        """
        started, suspended = _started(changes), _suspended(changes)
        if self._runner is not None and (started or suspended) and not self._manager.closing:
            for task in suspended:
                assert task.instance is not None
                self._runner.drop(task.instance)
            self._runner.drain()
        if started:
            instances = [t.instance for t in started if t.instance is not None]
            checkpoints: dict[str, TaskCheckpoint] = {
                t.name: t.checkpoint for t in started if t.checkpoint is not None
            }
            parts = input_partitions(self._job, self._inputs.consumer, instances, self._counts, checkpoints)
            for instance in instances:
                instance.offsets.update({p.ssp: p.start_offset for p in parts if p.task is instance})
            self._inputs.add(parts, positions(self._manager.running()))
        if suspended and not self._manager.closing:  # at shutdown the consumer just closes
            running = self._manager.running()
            self._inputs.drop_tasks(list(running), positions(running))


class AsyncFollower:
    """Runs the running async tasks in the container's :class:`AsyncRunner`."""

    def __init__(self, runner: AsyncRunner) -> None:
        self._runner = runner

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """Admit the started tasks (from the offsets the inputs set).

        Drop the suspended ones (their messages in flight are cancelled, if
        :class:`InputsFollower` has not already).
        """
        for task in _started(changes):
            assert task.instance is not None
            self._runner.add(task.instance)
        for task in _suspended(changes):
            assert task.instance is not None
            self._runner.drop(task.instance)


class HeadFlushFollower:
    """Keeps the ``flush.at.head`` stores of the running tasks in the :class:`HeadFlusher`."""

    def __init__(self, manager: TaskManager, flusher: HeadFlusher) -> None:
        self._manager = manager
        self._flusher = flusher

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """Add the started tasks' stores; forget the suspended ones' (nothing of theirs is written)."""
        for task in _started(changes):
            assert task.instance is not None
            self._flusher.add(task.instance)
        if _suspended(changes):
            self._flusher.drop(self._manager.running())


class GaugeFollower:
    """Registers each started task's gauges and its inputs'.

    Forgets the inputs no longer read (not at shutdown: the last metrics snapshot shows where
    each input ended).
    """

    def __init__(self, manager: TaskManager, registry: MetricsRegistry, inputs: Inputs) -> None:
        self._manager = manager
        self._registry = registry
        self._inputs = inputs

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """See the class docstring (after :class:`InputsFollower`, which opens the inputs)."""
        started = {id(t.instance) for t in _started(changes)}
        for task in _started(changes):
            assert task.instance is not None
            register_task_gauges(task.instance)
        if started:
            parts = [p for p in self._inputs.partitions.values() if id(p.task) in started]
            register_input_gauges(self._registry, self._inputs.consumer, parts)
        if _suspended(changes) and not self._manager.closing:
            forget_input_gauges(self._registry, self._inputs)


class StatusFollower:
    """Tells the container's status (``/health``, the status page) each task's state."""

    def __init__(self, manager: TaskManager, status: ContainerStatus) -> None:
        self._manager = manager
        self._status = status

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """Restoring and running tasks by name.

        Closed active ones are gone (at shutdown they keep their state: the container's own,
        ``stopped`` or ``failed``, says it all).
        """
        for change in changes:
            if change.after in (TaskState.RESTORING, TaskState.RUNNING):
                self._status.task_state(change.task.name, change.after.value)
            elif change.after is TaskState.CLOSED and change.before in ACTIVE and not self._manager.closing:
                self._status.task_gone(change.task.name)


class Standbys(Protocol):
    """Started standby replicas (:class:`~samzapy.container.standby.StandbyReplicas`)."""

    def stop(self) -> None:
        """Stop keeping the copies warm (a last local checkpoint of each)."""

    def copy_lags(self) -> dict[int, int | None]:
        """Per task kept, the changelog records its copy is behind (``None``: not known)."""


class StandbyFollower:
    """Keeps the standby replicas on the manager's standby and warming-up copies.

    Restarted when they change (a warm-up copy is kept up like a standby until its task moves
    here).

    Args:
        manager: the task manager.
        start: starts replicas of the given partitions (``None``: nothing to keep a copy of).
    """

    def __init__(self, manager: TaskManager, start: Callable[[list[int]], Standbys | None]) -> None:
        self._manager = manager
        self._start = start
        self._following: list[int] = []
        self._replicas: Standbys | None = None

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """Restart the replicas when a standby came or went.

        A promoted one stops first, so that its last local checkpoint is there for the restore.
        """
        copies = (TaskState.STANDBY, TaskState.WARMING_UP)
        if not any(c.before in copies or c.after in copies for c in changes):
            return
        wanted = sorted(set(self._manager.standbys()) | set(self._manager.warming_up()))
        if wanted == self._following:
            return
        self.stop()
        self._following = wanted
        if wanted:
            self._replicas = self._start(wanted)

    def copy_lags(self) -> dict[int, int | None]:
        """Per task a copy is kept of now, how far behind it is (see :meth:`Standbys.copy_lags`).

        Empty while no replicas run. Called from the group membership's thread: the replicas
        are read through one reference, a restart swaps it.
        """
        replicas = self._replicas
        return {} if replicas is None else replicas.copy_lags()

    def stop(self) -> None:
        """Stop the replicas (at shutdown, and before a restart)."""
        if self._replicas is not None:
            self._replicas.stop()
            self._replicas = None

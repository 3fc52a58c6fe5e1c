"""The one owner of a container's tasks (Kafka Streams' ``TaskManager`` + ``Tasks``).

Every task of a container, in both coordination modes, arrives and leaves through
:class:`TaskManager`, and only it moves a task's state machine
(:mod:`samzapy.container.task_states`):

- :meth:`TaskManager.assign`: new active tasks, restored (in background threads in group
  mode, at once in passthrough mode); :meth:`TaskManager.start_restored` then starts the
  restored ones (``init``, inputs read). Passthrough mode makes one fixed ``assign`` at start;
- :meth:`TaskManager.revoke`: commit, then close (the task moves to another member);
- :meth:`TaskManager.lose`: close without a commit (fenced by a newer owner, or the
  membership expired); what its caches held is dropped;
- :meth:`TaskManager.stand_by` and :meth:`TaskManager.warm_up`: the copies kept here of
  tasks that run elsewhere;
- :meth:`TaskManager.commit`: lose what the fence says another container took over, then
  commit the rest (:class:`~samzapy.container.commit.Commit`).

The run loop, the inputs, the async runner, the head flusher, the status page, the query
service's placement and the gauges do not hold the task list: they *subscribe*
(:meth:`TaskManager.subscribe`) and are told every batch of moves, in the order they
subscribed, on the container's thread. Readers on other threads (queries, reporters) read
:meth:`TaskManager.running`, a tuple replaced whole at every change.

Not thread-safe except :meth:`running`, :meth:`restoring` and :meth:`standbys`: the
container's thread calls it; restore threads only fill their task's stores.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from samzapy.checkpoint import TaskCheckpoint
from samzapy.container.task_instance import TaskInstance, TaskStores
from samzapy.container.task_states import IllegalTransition, ManagedTask, TaskState, Transition
from samzapy.crashpoints import pause_point

log = logging.getLogger(__name__)


class TaskListener(Protocol):
    """Told every batch of moves the task manager made (a part that follows the tasks)."""

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        """React to ``changes`` (one operation's moves, in order)."""


class TaskFactory(Protocol):
    """How the manager builds a task: the container's task builder behind two calls."""

    def restore(self, partition: int, checkpoint: TaskCheckpoint | None) -> TaskStores:
        """The task's stores, restored to ``checkpoint`` (called on a restore thread in group mode)."""

    def instance(self, partition: int, stores: TaskStores) -> TaskInstance:
        """The task's ``TaskInstance`` over ``stores``, ``init`` called."""


#: Commits these running tasks (``final``: with a local checkpoint of every store).
CommitTasks = Callable[[list[TaskInstance], bool], None]
#: Tasks another container took over since the last call: name -> its generation.
Fenced = Callable[[], Mapping[str, int]]


@dataclass
class _Restore:
    """A task's restore, on a thread of its own (background) or done at once."""

    processed_at_start: dict[str, int]  # the running tasks' messages processed so far
    started: float = field(default_factory=time.monotonic)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class TaskManager:
    """Owns every task of one container and its state machine (module docstring).

    Args:
        factory: restores stores and builds instances.
        commit: commits running tasks (the container's :class:`~samzapy.container.commit.Commit`).
        fenced: the fence's check (:meth:`samzapy.container.fencing.Fence.lost`, through the
            broker wait); ``None``: nothing is ever fenced.
        background: restore assigned tasks on threads while the others run (group mode).
    """

    def __init__(
        self,
        factory: TaskFactory,
        commit: CommitTasks,
        fenced: Fenced | None = None,
        *,
        background: bool = False,
    ) -> None:
        self._factory = factory
        self._commit = commit
        self._fenced = fenced
        self._background = background
        self._active: dict[int, ManagedTask] = {}
        self._copies: dict[int, ManagedTask] = {}  # standby and warming-up tasks
        self._restores: dict[int, _Restore] = {}
        self._listeners: list[TaskListener] = []
        self._running: tuple[TaskInstance, ...] = ()
        #: Set by :meth:`close`: listeners may leave what they keep as it is (shutdown).
        self.closing = False

    # ----------------------------------------------------------------- reading
    def subscribe(self, listener: TaskListener) -> None:
        """Tell ``listener`` every batch of moves from now on (after the earlier subscribers)."""
        self._listeners.append(listener)

    def running(self) -> tuple[TaskInstance, ...]:
        """The running tasks' instances, by partition (a snapshot: safe from any thread)."""
        return self._running

    def owns(self, instance: TaskInstance) -> bool:
        """Whether ``instance`` is running here now."""
        task = self._active.get(instance.partition)
        return task is not None and task.instance is instance and task.state is TaskState.RUNNING

    def restoring(self) -> list[int]:
        """The partitions being restored now."""
        return sorted(p for p, t in list(self._active.items()) if t.state is TaskState.RESTORING)

    def standbys(self) -> list[int]:
        """The partitions this container keeps standby copies of."""
        return sorted(p for p, t in list(self._copies.items()) if t.state is TaskState.STANDBY)

    def warming_up(self) -> list[int]:
        """The partitions this container is warming up copies of."""
        return sorted(p for p, t in list(self._copies.items()) if t.state is TaskState.WARMING_UP)

    def state_of(self, partition: int) -> TaskState | None:
        """The state of the active task ``partition``, else of its copy; ``None``: unknown here."""
        task = self._active.get(partition) or self._copies.get(partition)
        return None if task is None else task.state

    # ----------------------------------------------------------------- arriving
    def assign(self, checkpoints: Mapping[int, TaskCheckpoint | None]) -> None:
        """Make this container the owner of the tasks ``checkpoints`` names, and restore them.

        ``checkpoints`` maps a partition to the checkpoint to restore to; a standby or warm-up
        copy is promoted. Passthrough mode restores at once (a failure raises here); group mode
        on threads.

        Raises:
            IllegalTransition: a task is active here already.
        """
        changes: list[Transition] = []
        fresh: list[ManagedTask] = []
        for partition in checkpoints:
            if partition in self._active:
                active = self._active[partition]
                msg = f"{active.name}: cannot be assigned: it is {active.state.value} here already"
                raise IllegalTransition(msg)
        for partition, checkpoint in sorted(checkpoints.items()):
            task = self._copies.pop(partition, None) or ManagedTask(partition)
            task.checkpoint = checkpoint
            changes.append(task.move(TaskState.RESTORING))
            self._active[partition] = task
            fresh.append(task)
        self._tell(changes)
        processed = {t.task_name: _processed(t) for t in self._running}
        for task in fresh:
            restore = self._restores[task.partition] = _Restore(processed)
            if self._background:
                threading.Thread(
                    target=self._restore, args=(task, restore), name=f"restore-{task.partition}", daemon=True
                ).start()
            else:
                self._restore(task, restore)
                if restore.error is not None:
                    raise restore.error

    def _restore(self, task: ManagedTask, restore: _Restore) -> None:
        try:
            task.stores = self._factory.restore(task.partition, task.checkpoint)
        except BaseException as error:  # handed to the container's thread, which raises it
            restore.error = error
        finally:
            restore.done.set()

    def start_restored(self) -> list[TaskInstance]:
        """Start the tasks whose restore finished (``init``, then their inputs are read, by the listeners).

        The ones started.

        Raises:
            BaseException: what a restore raised (the container stops).
        """
        started: list[ManagedTask] = []
        failed: BaseException | None = None
        for partition, restore in sorted(self._restores.items()):
            if not restore.done.is_set() or restore.error is not None:
                failed = failed or restore.error
                continue
            del self._restores[partition]
            task = self._active[partition]
            task.instance = self._factory.instance(partition, task.stores)
            started.append(task)
            if self._background:
                self._log_background_restore(task, restore)
        self._tell([t.move(TaskState.RUNNING) for t in started])
        if failed is not None:  # after the others started: they close as running tasks
            raise failed
        return [t.instance for t in started if t.instance is not None]

    def _log_background_restore(self, task: ManagedTask, restore: _Restore) -> None:
        assert task.instance is not None
        paused_s = time.monotonic() - restore.started  # the task's pause on its way here
        task.instance.metrics.gauge("rebalance-pause-s").set(round(paused_s, 3))
        meanwhile = sum(
            _processed(t) - restore.processed_at_start[t.task_name]
            for t in self._running
            if t.task_name in restore.processed_at_start
        )
        log.info(
            "%s: restored in %.1fs in the background, while this member's other tasks processed %d "
            "messages; processing",
            task.name,
            paused_s,
            meanwhile,
        )

    # ----------------------------------------------------------------- copies
    def stand_by(self, partitions: Iterable[int]) -> None:
        """Keep standby copies of exactly ``partitions`` (copies no longer named are closed)."""
        self._copies_to(TaskState.STANDBY, set(partitions))

    def warm_up(self, partitions: Iterable[int]) -> None:
        """Warm up copies of exactly ``partitions`` (copies no longer named are closed).

        :meth:`assign` promotes one when the task moves here.
        """
        self._copies_to(TaskState.WARMING_UP, set(partitions))

    def _copies_to(self, state: TaskState, wanted: set[int]) -> None:
        changes: list[Transition] = []
        for partition, task in sorted(self._copies.items()):
            if task.state is state and partition not in wanted:
                changes.append(task.move(TaskState.CLOSED))
                del self._copies[partition]
        for partition in sorted(wanted - set(self._copies) - set(self._active)):
            task = self._copies[partition] = ManagedTask(partition)
            changes.append(task.move(state))
        self._tell(changes)

    # ----------------------------------------------------------------- leaving
    def revoke(self, partitions: Iterable[int]) -> None:
        """Let the tasks of ``partitions`` go to another owner.

        Running ones are committed (with a local checkpoint of every store, after the fence
        check), then closed, their stores kept on disk; restoring ones are closed when their
        restore thread is done.
        """
        wanted = set(partitions)
        self.commit(final=True, partitions=wanted)
        self._leave(wanted, commit=True)

    def lose(self, partitions: Iterable[int]) -> None:
        """Drop the tasks of ``partitions`` without a commit.

        Another owner may have them already, so nothing of theirs is written; their stores are
        closed without a flush (what the caches held is dropped) and kept on disk.
        """
        self._leave(set(partitions), commit=False)

    def _leave(self, wanted: set[int], *, commit: bool) -> None:
        leaving = [t for p, t in sorted(self._active.items()) if p in wanted]
        if not leaving:
            return
        for task in leaving:
            if task.instance is not None and not commit:
                task.instance.coordinator.shutdown_requested = True  # stops a batch being processed
        self._tell([t.move(TaskState.SUSPENDED) for t in leaving])
        for task in leaving:
            self._close_one(task, commit=commit)
        self._tell([t.move(TaskState.CLOSED) for t in leaving])
        for task in leaving:
            del self._active[task.partition]

    def _close_one(self, task: ManagedTask, *, commit: bool) -> None:
        restore = self._restores.pop(task.partition, None)
        if restore is not None:  # never started: nothing to commit, close what was built
            restore.done.wait()
        if task.instance is not None:
            _try(task.instance.close if commit else task.instance.abandon, f"closing {task.name}")
            return
        for store in task.stores.values():
            _try(store.close, f"closing a store of {task.name}")

    # ----------------------------------------------------------------- commit and close
    def drop_fenced(self) -> list[int]:
        """Lose the tasks the fence says another container took over; the partitions lost.

        Their stores are not flushed, no checkpoint is written for them, their async messages in
        flight are cancelled.
        """
        taken = {} if self._fenced is None else self._fenced()
        mine = {t.name: p for p, t in self._active.items()}
        lost = sorted(mine[n] for n in taken if n in mine)
        for name, generation in sorted(taken.items()):
            log.error(
                "%s: fenced: another container owns it now (generation %d); dropping it "
                "without writing its stores or a checkpoint",
                name,
                generation,
            )
        self.lose(lost)
        return lost

    def commit(self, *, final: bool = False, partitions: set[int] | None = None) -> None:
        """Lose the fenced tasks (:meth:`drop_fenced`), then commit the running ones.

        Only those of ``partitions`` if given; ``final``: every store's local checkpoint.
        """
        self.drop_fenced()
        pause_point("after-fence-check")
        tasks = [t for t in self._running if partitions is None or t.partition in partitions]
        if tasks or partitions is None:
            self._commit(tasks, final)

    def close(self) -> None:
        """Close every task (after the final commit).

        Running ones with their ``close``, restoring ones when their thread is done, copies at
        once.
        """
        self.closing = True
        active = sorted(self._active.values(), key=lambda t: t.partition)
        running = [t for t in active if t.state is TaskState.RUNNING]
        self._tell([t.move(TaskState.SUSPENDED) for t in running])
        for task in active:
            self._close_one(task, commit=True)
        self._tell([t.move(TaskState.CLOSED) for t in active])
        self._active.clear()
        self._copies_to(TaskState.STANDBY, set())
        self._copies_to(TaskState.WARMING_UP, set())

    # ----------------------------------------------------------------- telling
    def _tell(self, changes: list[Transition]) -> None:
        if not changes:
            return
        self._running = tuple(
            t.instance
            for _, t in sorted(self._active.items())
            if t.state is TaskState.RUNNING and t.instance is not None
        )
        for listener in self._listeners:
            listener.tasks_changed(changes)


def _processed(instance: TaskInstance | None) -> int:
    return 0 if instance is None else instance.metrics.counter("messages-actually-processed").value


def _try(close: Callable[[], Any], what: str) -> None:
    """Run ``close``; log (not raise) a failure, so that the other tasks close too."""
    try:
        close()
    except Exception:
        log.exception("%s failed", what)

"""The commit (DESIGN §6): what makes a container's progress durable, in one object.

A crash anywhere in :meth:`Commit.__call__` leaves the last checkpoint consistent: on
restart, stores are rolled back to exactly the checkpointed changelog offsets and input
resumes at the checkpointed offsets (``stores/restore.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint
from samzapy.container.checkpoint_schedule import LocalCheckpointSchedule
from samzapy.crashpoints import crash_point
from samzapy.metrics import MetricsGroup
from samzapy.records import RecordSink

if TYPE_CHECKING:
    from samzapy.container.task_instance import TaskInstance
    from samzapy.stores.snapshots import JobSnapshots


def changelog_offsets(tasks: Iterable[TaskInstance]) -> dict[str, dict[str, int | None]]:
    """Every store's changelog offset (after the producer flush: exact), by task name."""
    return {t.task_name: {name: s.changelog_offset() for name, s in t.stores.items()} for t in tasks}


def take_local_checkpoints(
    chosen: Iterable[tuple[TaskInstance, str]], offsets: dict[str, dict[str, int | None]]
) -> None:
    """Take a local checkpoint of each chosen (task, store name) at its changelog offset."""
    for task, name in chosen:
        task.stores[name].checkpoint(offsets[task.task_name][name])


class Commit:
    """Commits the tasks of a container; call it with the tasks it still owns.

    The steps, in this order, for all tasks at once:

    1. **drain**: async tasks finish every message they took in, so that stores match the
       offsets about to be checkpointed (:meth:`AsyncRunner.drain`);
    2. **flush stores**: every object cache is written down to its engine, changelog records
       are handed to the producer;
    3. **flush the producer**: every changelog and output record is acknowledged;
    4. **read every engine's changelog offset** (exact: from the acknowledgements);
    5. **take the chosen local checkpoints**: the stores the
       :class:`~samzapy.container.checkpoint_schedule.LocalCheckpointSchedule` chooses
       (every store at a ``final`` commit), each at its offset of step 4;
    6. **write the checkpoints**: each task's input next-offsets, store changelog offsets,
       ownership generation and changelog fence (from the fence), one record per task to the
       checkpoint topic (a task whose checkpoint did not change since the last one written is
       skipped, so an idle container sends nothing), then flush the producer again; with
       snapshots, each checkpoint names its stores' newest complete snapshot;
    7. **queue snapshot uploads** (only with ``snapshots``): the local checkpoints of step 5
       of stores backed up to a blob store are handed to the background uploader
       (``stores/snapshots.py``); the commit does not wait for them.

    Fencing is not a step: the task manager asks the fence which tasks another container took
    over and loses them *before* calling the commit (``task_manager.TaskManager.commit``).

    Args:
        producer: the container's producer (outputs, changelogs and checkpoints).
        writer: writes checkpoint records through ``producer``.
        schedule: chooses the local checkpoints of step 5.
        checkpoint_of: a task's checkpoint from its name, input offsets and changelog offsets,
            stamped with its ownership generation and changelog fence
            (:meth:`samzapy.container.fencing.Fence.checkpoint`).
        metrics: the container's group (``commit-calls``, ``commit-ns``).
        drain: step 1, ``None`` without async tasks.
        flush: flushes the producer, given what the flush is for (the container's waits out
            an unreachable broker: ``samzapy.kafka.outage``); ``None``: ``producer.flush()``.
        snapshots: the job's ``samzapy.stores.snapshots.JobSnapshots`` (steps 6 and 7), ``None``
            when no store backs up to a blob store.

    Not thread-safe: the run loop's thread calls it.
    """

    def __init__(
        self,
        producer: RecordSink,
        writer: CheckpointWriter,
        schedule: LocalCheckpointSchedule,
        checkpoint_of: Callable[[str, dict[Any, int], dict[str, int | None]], TaskCheckpoint],
        metrics: MetricsGroup,
        drain: Callable[[], None] | None = None,
        flush: Callable[[str], None] | None = None,
        snapshots: JobSnapshots | None = None,
    ) -> None:
        self._writer = writer
        self._snapshots = snapshots
        self._schedule = schedule
        self._checkpoint_of = checkpoint_of
        self._drain = drain
        self._flush = flush if flush is not None else lambda what: producer.flush()
        self.calls = metrics.counter("commit-calls")
        self._ns = metrics.counter("commit-ns")
        self._latency = metrics.histogram("commit-latency")
        #: The last checkpoint written per task name (read by the query service).
        self.last_written: dict[str, TaskCheckpoint] = {}

    def __call__(self, tasks: list[TaskInstance], *, final: bool = False) -> None:
        """Run the steps of the class docstring for ``tasks``.

        ``final`` (at shutdown) takes every store's local checkpoint.
        """
        started = time.perf_counter_ns()
        if self._drain is not None:
            self._drain()
        for task in tasks:
            task.flush_stores()
        self._flush("flush the changelog and output writes")
        crash_point("after-producer-flush")
        offsets = changelog_offsets(tasks)
        take_local_checkpoints(self._schedule.choose(tasks, final=final, now=time.monotonic()), offsets)
        crash_point("after-local-checkpoint")
        for task in tasks:
            task.coordinator.commit_requested = False
            checkpoint = self._checkpoint_of(task.task_name, dict(task.offsets), offsets[task.task_name])
            if self._snapshots is not None:
                checkpoint = self._snapshots.stamp(checkpoint)
            self._write(checkpoint)
        self._flush("write the checkpoints")
        if self._snapshots is not None:
            self._snapshots.after_commit(tasks, self.last_written, offsets)
        self.calls.inc()
        elapsed = time.perf_counter_ns() - started
        self._ns.inc(elapsed)
        self._latency.observe(elapsed / 1e9)

    def _write(self, checkpoint: TaskCheckpoint) -> None:
        if self.last_written.get(checkpoint.task_name) != checkpoint:
            self._writer.write(checkpoint)
            self.last_written[checkpoint.task_name] = checkpoint

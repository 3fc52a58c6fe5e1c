"""The run loop of a started container: poll -> process -> window -> commit, until it stops.

One iteration: apply the side-input updates that arrived; poll; hand each batch to its task
(sync: :meth:`TaskInstance.process_records`, committing right after a call that asks for
it; async: :meth:`AsyncRunner.submit`); flush the stores kept at the input's head; run the
async tasks' loop for a slice; call ``window`` where ``task.window.ms`` has passed; commit
every ``task.commit.ms`` or when a task asked; stop when a task asked to shut down, a signal
arrived, or (``--exit-at-end``) every input reached the end it had at start, after a last
``window`` call on every task (the windows its input closed are emitted). A progress line
every :data:`PROGRESS_EVERY_S` seconds.

The loop owns no part of the container: it is handed them (:class:`RunLoop`). It reads the
running tasks from the container's task manager at each step, never a list of its own, and
stops handing out a poll's records once the inputs were sought again under it (a task came
or went in a commit or while the lease was held): those records come again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from samzapy.config import JobConfig
from samzapy.container.input_order import input_source
from samzapy.crashpoints import pause_point
from samzapy.metrics import MetricsGroup
from samzapy.streams import SystemStreamPartition

if TYPE_CHECKING:
    from samzapy.container.async_runner import AsyncRunner
    from samzapy.container.head_flush import HeadFlusher
    from samzapy.container.inputs import InputPartition, Inputs
    from samzapy.container.side_inputs import SideInputs
    from samzapy.container.task_instance import TaskInstance
    from samzapy.records import Record

    #: One polled batch: an input partition and its records, in offset order.
    Polled = list[tuple[InputPartition, list[Record]]]

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 5.0
POLL_TIMEOUT_MS = 100
MAX_POLL_RECORDS = 5000


def positions(tasks: Iterable[TaskInstance]) -> dict[SystemStreamPartition, int]:
    """Every input partition's next offset, over ``tasks``."""
    found: dict[SystemStreamPartition, int] = {}
    for task in tasks:
        found.update(task.offsets)
    return found


def processed(tasks: Iterable[TaskInstance]) -> int:
    """Messages processed by ``tasks`` so far."""
    return sum(t.metrics.counter("messages-actually-processed").value for t in tasks)


class Tasks(Protocol):
    """The running tasks, as the loop reads them (:class:`~samzapy.container.task_manager.TaskManager`)."""

    def running(self) -> Sequence[TaskInstance]:
        """The running tasks' ``TaskInstance`` objects."""

    def owns(self, instance: TaskInstance) -> bool:
        """Whether ``instance`` is running now."""


class Membership(Protocol):
    """Group mode's part in the loop (:class:`~samzapy.container.group_tasks.GroupTasks`)."""

    def poll(self) -> None:
        """Take part in the group protocol; apply what a rebalance changed to the tasks."""

    @property
    def settled(self) -> bool:
        """Whether no rebalance or restore is pending."""

    def hold(self, stopping: Callable[[], bool]) -> bool:
        """Block while the member's lease has lapsed; whether it holds."""


class RunLoop:
    """Runs the loop of the module docstring over a started container's parts.

    Args:
        job: the job's config (``task.commit.ms``, ``task.window.ms``).
        tasks: the container's task manager (the running tasks, read at each step).
        inputs: the container's ``Inputs``.
        side_inputs: the container's ``SideInputs``.
        runner: the ``AsyncRunner``, ``None`` without async tasks.
        head_flusher: the ``HeadFlusher``, ``None`` without ``flush.at.head`` stores.
        commit: the container's commit (fence, then :class:`~samzapy.container.commit.Commit`).
        stopping: whether a stop was asked (a signal, or every task fenced).
        metrics: the container's group (``window-ns``).
        write_metrics: writes the metrics file (after a progress line).
        exit_at_end: stop once every input reached the end it had at start.
        group: group mode: polled once per turn before the input poll; polled records are
            processed only while the member's lease holds (records of tasks it lost meanwhile
            are dropped); exit at end waits until it is settled.
    """

    def __init__(
        self,
        job: JobConfig,
        tasks: Tasks,
        inputs: Inputs,
        side_inputs: SideInputs,
        runner: AsyncRunner | None,
        head_flusher: HeadFlusher | None,
        commit: Callable[[], None],
        stopping: Callable[[], bool],
        metrics: MetricsGroup,
        write_metrics: Callable[[], None],
        *,
        exit_at_end: bool = False,
        group: Membership | None = None,
    ) -> None:
        self._tasks = tasks
        self._inputs = inputs
        # What is polled: the inputs, or (task.input.order=timestamp) their records merged by
        # timestamp for tasks with several inputs (samzapy/container/input_order.py).
        self._source = input_source(job, inputs, exit_at_end=exit_at_end)
        self._side_inputs = side_inputs
        self._runner = runner
        self._head_flusher = head_flusher
        self._commit = commit
        self._stopping = stopping
        self._write_metrics = write_metrics
        self._exit_at_end = exit_at_end
        self._group = group
        self._commit_s = job.commit_ms / 1000
        self._window_s = job.window_ms / 1000 if job.window_ms else None
        self._window_ns = metrics.counter("window-ns")
        self._progress_at = 0.0  # when the last progress line was logged, and the count then
        self._processed_at_progress = 0

    def run(self) -> None:
        """Loop until a stop is asked, a task shuts down, or (exit at end) input is read."""
        last_commit = self._progress_at = time.monotonic()
        while not self._stopping():
            self._side_inputs.pump()  # table updates that arrived are applied before the next poll
            if self._group is not None:
                self._group.poll()
            polled, max_records = self._poll()
            if polled:
                pause_point("after-poll")
            if self._group is not None and polled:
                polled = self._still_owned(polled, self._group)
            self._process(polled)
            if self._head_flusher is not None and polled:
                self._head_flusher.after_poll(sum(len(records) for _, records in polled), max_records)
            if self._runner is not None:
                self._runner.pump()
            now = time.monotonic()
            self._window(now)
            if now - last_commit >= self._commit_s or any(
                t.coordinator.commit_requested for t in self._tasks.running()
            ):
                self._commit()
                last_commit = time.monotonic()
            if self._finished():
                break
            if now - self._progress_at >= PROGRESS_EVERY_S:
                self._log_progress(now)

    def _poll(self) -> tuple[Polled, int]:
        """The next records, and how many the poll could have returned.

        Async tasks get bounded polls, no blocking while they hold work, and no poll at all
        while full.
        """
        runner = self._runner
        if runner is None:
            return self._source.poll(POLL_TIMEOUT_MS, MAX_POLL_RECORDS), MAX_POLL_RECORDS
        max_records = runner.poll_budget(MAX_POLL_RECORDS)
        if runner.full:
            return [], max_records
        return self._source.poll(0 if runner.busy else POLL_TIMEOUT_MS, max_records), max_records

    def _still_owned(self, polled: Polled, group: Membership) -> Polled:
        """``polled`` once the member's lease holds, without the tasks it lost meanwhile."""
        epoch = self._inputs.epoch
        if not group.hold(self._stopping) or self._inputs.epoch != epoch:
            return []  # a stop, or the inputs were sought again: these records come again
        owned = {id(t) for t in self._tasks.running()}
        return [(part, records) for part, records in polled if id(part.task) in owned]

    def _process(self, polled: Polled) -> None:
        """Hand each polled batch to its task; commit where a task asks, right after the call."""
        runner, inputs = self._runner, self._inputs
        epoch = inputs.epoch
        for part, records in polled:
            task = part.task
            if runner is not None and runner.owns(task):
                runner.submit(part.ssp, task, records)
                continue
            done = 0
            while done < len(records) and not task.coordinator.shutdown_requested:
                done = task.process_records(part.ssp, records, done)
                if task.coordinator.commit_requested:
                    self._commit()
                    if inputs.epoch != epoch:  # a task was lost: its records, and these, come again
                        return
            if self._stopping() or task.coordinator.shutdown_requested:
                return

    def _window(self, now: float, *, every_task: bool = False) -> None:
        """Call ``window`` on each task whose ``task.window.ms`` has passed.

        ``every_task``: on each task, due or not.
        """
        window_s = self._window_s
        if window_s is None:
            return
        due = [t for t in self._tasks.running() if every_task or now - t.last_window >= window_s]
        if due and self._runner is not None:
            self._runner.drain()  # a window call sees no message half-processed
        for task in due:
            started = time.perf_counter_ns()
            task.window()
            self._window_ns.inc(time.perf_counter_ns() - started)

    def _finished(self) -> bool:
        """Whether a task asked to shut down or, with exit at end, every input is read."""
        running = self._tasks.running()
        if any(t.coordinator.shutdown_requested for t in running):
            log.info("a task asked to shut down")
            return True
        self._inputs.note_progress(positions(running))
        settled = self._group is None or self._group.settled
        if self._exit_at_end and self._inputs.all_caught_up() and settled:
            log.info("every input reached the end offset it had at start: stopping (--exit-at-end)")
            # What a live job would emit at its next window() call (windows the input has
            # closed) is emitted now, before the final commit, not left for a next run.
            self._window(time.monotonic(), every_task=True)
            return True
        return False

    def _log_progress(self, now: float) -> None:
        running = self._tasks.running()
        total = processed(running)
        rate = (total - self._processed_at_progress) / (now - self._progress_at)
        lag = self._inputs.lag(positions(running))
        log.info("processed %d messages (%.0f msg/s); lag %s", total, rate, lag)
        self._processed_at_progress, self._progress_at = total, now
        self._write_metrics()

"""Running :class:`samzapy.AsyncStreamTask` tasks.

Per-key lanes on an asyncio loop, offsets through :class:`OffsetTracker`, timeouts, retries, a
delay queue and backpressure.

The container stays single-threaded: it owns one asyncio loop and runs it in short slices
between polls (:meth:`AsyncRunner.pump`). A message goes through these steps:

1. *admit* (container thread, in offset order per partition): deserialise, take the offset
   in its partition's :class:`OffsetTracker`, append the message to lane ``hash(key) % N``
   (``N = task.max.concurrency``). A task holds at most ``task.async.queue.size`` messages:
   a poll asks for no more records than the fullest task has room for, and while a task is
   full the container does not poll at all, it only runs the loop. The consumer then keeps
   at most one fetched batch per partition (it does not fetch a partition whose previous
   response is unread), so memory stays bounded however fast input is. (``consumer.pause``
   is not used for this: kafka-python 3.0.12 parks the records of a paused partition and,
   when the partition is resumed while its fetch slot holds an exhausted batch, never
   hands them back, so the partition stalls for good.)
2. *lane* (a coroutine per non-empty lane): takes its messages one by one, so messages of
   one key run in order; lanes run in parallel. With ``task.process.delay.ms`` D, the lane
   first waits until the message's timestamp + D (never more than D).
3. *attempt*: ``process_async`` under ``task.callback.timeout.ms``; a failure or timeout is
   retried ``task.retry.max.attempts`` times after ``task.retry.backoff.ms * 2**(n-1)``
   (a storage failure is not retried); then the container's one error policy
   (:mod:`samzapy.container.error_policy`) dead-letters it, skips it or stops the job.
4. *done*: the tracker marks the offset done; the task's checkpointable offset becomes
   ``tracker.committable()``, never past the lowest offset still held.

Commit and window: before either, the container *drains* (:meth:`AsyncRunner.drain`): it
stops admitting and runs the loop until every held message is done. This is the simplest
way to keep stores exact (DESIGN §6): a message that finished out of order above a message
still in flight would otherwise have its store writes committed with a checkpoint that
makes it run again after a crash. Draining costs a commit at most the slowest message (and
D with a delay queue). Samza's AsyncRunLoop also runs commit and window only when no
process call is in flight.

A job stopped by a failure never commits what its async tasks did since the last commit:
messages above the failed one may have finished and written to stores.

Thread safety: everything runs on the container thread; user code that moves work to
threads (``asyncio.to_thread``) must not touch stores or the collector from there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import zlib
from collections import deque
from dataclasses import dataclass
from typing import cast

from samzapy.config.model import JobConfig
from samzapy.container.collector import TaskCollector
from samzapy.container.envelopes import envelope_of
from samzapy.container.error_policy import ErrorPolicy, MessageFailure, storage_failure_in
from samzapy.container.offset_tracker import OffsetTracker
from samzapy.container.task_instance import TaskInstance
from samzapy.records import Record
from samzapy.streams import SystemStreamPartition
from samzapy.task import AsyncStreamTask, IncomingMessageEnvelope, OutgoingMessageEnvelope

log = logging.getLogger(__name__)

#: How long one slice of the asyncio loop runs between polls while messages are held.
SLICE_S = 0.002


@dataclass(slots=True)
class _Held:
    """One message taken in by a task and not done yet."""

    ssp: SystemStreamPartition
    record: Record
    envelope: IncomingMessageEnvelope
    tracker: OffsetTracker


class _MessageCollector:
    """The collector one message's ``process_async`` gets.

    Stamps output ids per message (``<task>:<offset>:<n>``, as the sync path does), so that
    concurrent messages do not share a sequence; a retry numbers its outputs from 0 again (same
    ids, dedupable).
    """

    __slots__ = ("_collector", "_prefix", "_sequence")

    def __init__(self, collector: TaskCollector, prefix: str) -> None:
        self._collector = collector
        self._prefix = prefix
        self._sequence = 0

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        """Send ``envelope`` through the task's collector with this message's next id."""
        if envelope.id is None:
            envelope = dataclasses.replace(envelope, id=f"{self._prefix}:{self._sequence}")
            self._sequence += 1
        self._collector.send(envelope)


class AsyncTaskRunner:
    """The lanes, trackers and counters of one async task; see the module docstring."""

    def __init__(
        self, instance: TaskInstance, job: JobConfig, policy: ErrorPolicy, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.instance = instance
        self._policy = policy
        self._loop = loop
        self.capacity: int = job.async_queue_size
        self._lanes: list[deque[_Held]] = [deque() for _ in range(job.max_concurrency)]
        self._workers: list[asyncio.Task[None] | None] = [None] * job.max_concurrency
        self._timeout_s: float | None = job.callback_timeout_ms / 1000 if job.callback_timeout_ms else None
        self._max_retries = job.retry_max_attempts
        self._backoff_s = job.retry_backoff_ms / 1000
        self._delay_s = job.process_delay_ms / 1000 if job.process_delay_ms is not None else None
        self.trackers: dict[SystemStreamPartition, OffsetTracker] = {}
        self.held = 0
        self.running = 0
        self.delayed = 0
        self.failure: MessageFailure | None = None
        m = instance.metrics
        self._processed = m.counter("messages-actually-processed")
        self._process_ns = m.counter("process-ns")
        self._process_latency = m.histogram("process-latency")
        self._retries = m.counter("retries")
        self._timeouts = m.counter("timeouts")
        self._max_held = m.gauge("max-queue-length")
        m.gauge("in-flight", lambda: self.held)
        m.gauge("running", lambda: self.running)
        m.gauge("queue-length", lambda: self.held - self.running)
        m.gauge("delayed", lambda: self.delayed)
        m.gauge("queue-capacity", lambda: self.capacity)

    @property
    def free(self) -> int:
        """Room left before the task is full."""
        return self.capacity - self.held

    def start_at(self, offsets: dict[SystemStreamPartition, int]) -> None:
        """One tracker per input partition, starting at its starting offset."""
        for ssp, offset in offsets.items():
            self.trackers[ssp] = OffsetTracker(offset)

    # ----------------------------------------------------------------- admit
    def admit(self, ssp: SystemStreamPartition, record: Record) -> None:
        """Take in one record (the caller makes sure there is room)."""
        tracker = self.trackers[ssp]
        tracker.start(record.offset)
        try:
            envelope = self._envelope(ssp, record)
        except Exception as exc:
            self._finish_failed(ssp, record, tracker, exc, "could not deserialise", deserialising=True)
            return
        held = _Held(ssp, record, envelope, tracker)
        lane = self._lane_of(record)
        self._lanes[lane].append(held)
        self.held += 1
        if self.held > self._max_held.value:
            self._max_held.set(self.held)
        if self._workers[lane] is None:
            self._workers[lane] = self._loop.create_task(self._run_lane(lane))

    def _envelope(self, ssp: SystemStreamPartition, record: Record) -> IncomingMessageEnvelope:
        return envelope_of(ssp, record, *self.instance.input_serdes[ssp])

    def _lane_of(self, record: Record) -> int:
        lanes = len(self._lanes)
        if lanes == 1:
            return 0
        if record.key is None:  # no key, no order to keep
            return record.offset % lanes
        return zlib.crc32(record.key) % lanes

    # ----------------------------------------------------------------- lanes
    async def _run_lane(self, lane: int) -> None:
        queue = self._lanes[lane]
        try:
            while queue and self.failure is None:
                held = queue[0]
                await self._wait_due(held)
                await self._process(held)
                queue.popleft()
        finally:
            self._workers[lane] = None

    async def _wait_due(self, held: _Held) -> None:
        if self._delay_s is None:
            return
        wait = held.envelope.timestamp / 1000 + self._delay_s - time.time()
        if wait > 0:
            self.delayed += 1
            try:
                await asyncio.sleep(min(wait, self._delay_s))
            finally:
                self.delayed -= 1

    async def _process(self, held: _Held) -> None:
        instance = self.instance
        offset = held.record.offset
        attempt = 1
        while True:
            collector = _MessageCollector(instance.collector, f"{instance.task_name}:{offset}")
            task = cast(AsyncStreamTask, instance.task)  # the runner is built for async tasks alone
            call = task.process_async(held.envelope, collector, instance.coordinator)
            self.running += 1
            started = time.perf_counter_ns()
            try:
                if self._timeout_s is None:
                    await call
                else:
                    await asyncio.wait_for(call, self._timeout_s)
                error: BaseException | None = None
            except TimeoutError as exc:
                self._timeouts.inc()
                error = TimeoutError(
                    f"took longer than task.callback.timeout.ms={(self._timeout_s or 0) * 1000:.0f}"
                )
                error.__cause__ = exc
            except Exception as exc:
                error = exc
            finally:
                self.running -= 1
                elapsed = time.perf_counter_ns() - started
                self._process_ns.inc(elapsed)
                self._process_latency.observe(elapsed / 1e9)
            if error is None:
                self._processed.inc()
                self._done(held)
                return
            if attempt > self._max_retries or storage_failure_in(error) is not None:
                self._finish_failed(
                    held.ssp, held.record, held.tracker, error, f"process_async() failed {attempt} times"
                )
                self.held -= 1
                return
            self._retries.inc()
            await asyncio.sleep(self._backoff_s * 2 ** (attempt - 1))
            attempt = held.tracker.start(offset)  # a retry: the same offset, a newer attempt

    def _done(self, held: _Held) -> None:
        held.tracker.done(held.record.offset)
        self.held -= 1
        self.instance.offsets[held.ssp] = held.tracker.committable()

    def _finish_failed(
        self,
        ssp: SystemStreamPartition,
        record: Record,
        tracker: OffsetTracker,
        exc: BaseException,
        what: str,
        *,
        deserialising: bool = False,
    ) -> None:
        """Apply the error policy to a message that failed for good; done unless it stops.

        A stop is never safe to commit here: messages above the failed one may be done.
        """
        try:
            self._policy.handle(
                self.instance.failures,
                self.instance.task_name,
                ssp,
                record,
                exc,
                what,
                deserialising=deserialising,
                safe_to_commit=False,
            )
        except MessageFailure as failure:
            if self.failure is None:
                self.failure = failure
            return
        tracker.done(record.offset)
        self.instance.offsets[ssp] = tracker.committable()

    def cancel(self) -> None:
        """Cancel the lanes (at shutdown after a failure)."""
        for worker in self._workers:
            if worker is not None:
                worker.cancel()


class AsyncRunner:
    """The container's async side: one asyncio loop, one :class:`AsyncTaskRunner` per async task.

    The container calls :meth:`submit` with each polled batch of an async task, :meth:`pump`
    once per loop iteration, :meth:`drain` before a commit or a window call, and
    does not poll while :attr:`full`. Any of them raises the first
    :class:`MessageFailure` of a message whose policy is to stop the job.
    """

    def __init__(self, tasks: list[TaskInstance], job: JobConfig, policy: ErrorPolicy) -> None:
        self._loop = asyncio.new_event_loop()
        self._job = job
        self._policy = policy
        self.runners = {
            id(t): AsyncTaskRunner(t, job, policy, self._loop)
            for t in tasks
            if isinstance(t.task, AsyncStreamTask)
        }

    @classmethod
    def for_tasks(cls, tasks: list[TaskInstance], job: JobConfig, policy: ErrorPolicy) -> AsyncRunner | None:
        """A runner when some task is an :class:`AsyncStreamTask`, else ``None``."""
        if not any(isinstance(t.task, AsyncStreamTask) for t in tasks):
            return None
        return cls(tasks, job, policy)

    def add(self, task: TaskInstance) -> None:
        """Run ``task`` too (if it is an :class:`AsyncStreamTask`), from the offsets it has now.

        For a task that started at runtime: its inputs' starting offsets are set.
        """
        if isinstance(task.task, AsyncStreamTask):
            runner = self.runners[id(task)] = AsyncTaskRunner(task, self._job, self._policy, self._loop)
            runner.start_at(task.offsets)

    def drop(self, task: TaskInstance) -> None:
        """Stop running ``task`` (fenced): its messages in flight are cancelled, never done."""
        runner = self.runners.pop(id(task), None)
        if runner is not None:
            runner.cancel()

    def owns(self, task: TaskInstance) -> bool:
        """Whether ``task`` is run here."""
        return id(task) in self.runners

    def start(self) -> None:
        """Create the trackers, once the tasks' starting offsets are known."""
        for runner in self.runners.values():
            runner.start_at(runner.instance.offsets)

    @property
    def full(self) -> bool:
        """Whether some task has no room left: the container then does not poll at all."""
        return any(r.free <= 0 for r in self.runners.values())

    @property
    def busy(self) -> bool:
        """Whether any message is held."""
        return any(r.held for r in self.runners.values())

    def poll_budget(self, default: int) -> int:
        """How many records one poll may return: no more than the fullest task has room for."""
        room = min((r.free for r in self.runners.values()), default=default)
        return max(1, min(default, room))

    def submit(self, ssp: SystemStreamPartition, task: TaskInstance, records: list[Record]) -> None:
        """Admit ``records`` of ``ssp``, running the loop while the task is full."""
        runner = self.runners[id(task)]
        for record in records:
            while runner.free <= 0:
                self._slice()
            runner.admit(ssp, record)
        self._raise_failure()

    def pump(self) -> None:
        """Run the loop for one slice when messages are held."""
        if self.busy:
            self._slice()
        else:
            self._loop.run_until_complete(asyncio.sleep(0))
        self._raise_failure()

    def drain(self) -> None:
        """Run the loop until every held message is done (before a commit or a window)."""
        while self.busy:
            self._slice()
        self._raise_failure()

    def _slice(self) -> None:
        self._loop.run_until_complete(asyncio.sleep(SLICE_S))
        self._raise_failure()

    def _raise_failure(self) -> None:
        for runner in self.runners.values():
            if runner.failure is not None:
                raise runner.failure

    def close(self) -> None:
        """Cancel what is left and close the loop."""
        for runner in self.runners.values():
            runner.cancel()
        try:
            self._loop.run_until_complete(asyncio.sleep(0))
        finally:
            self._loop.close()

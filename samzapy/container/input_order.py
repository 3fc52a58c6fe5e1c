"""A task's input records in timestamp order (``task.input.order=timestamp``).

A task with several inputs (a join, a merge) sees a different interleaving of them depending on
how the consumer's polls happen to return a backlog, and a join's output depends on that
interleaving. With ``task.input.order=timestamp`` (the default) the container buffers what
each poll returns and hands a task its records in one order that depends on the records
alone, :func:`order_key`, the order the Spark replay merges a task's history in
(:mod:`samzapy.spark.replay.partition`). A streaming run over existing history and its replay
then see the same sequence, and produce the same output ids and bytes.

:func:`order_key` ranks a record by, in turn: bootstrap streams first
(``samza.bootstrap``); higher ``samza.priority`` first (Samza's meaning: a stream of higher
priority is read first when several have messages); the record timestamp; the stream's place in
``task.inputs``; the partition; the offset. The last three make ties deterministic, and each
partition stays in offset order: the next record is always the smallest *head* of the task's
partitions (a k-way merge, as Kafka Streams' PartitionGroup picks the queue with the smallest
head timestamp), never a sort that could reorder one partition.

Taking the smallest head is only right when every input of the task has its head at hand.
When a partition's buffer is empty (Kafka Streams' ``max.task.idle.ms`` semantics, here
``task.max.idle.ms``):

* if records are known to exist beyond what was fetched (below the partition's end at start,
  or below the end the last fetch reported), the task waits for the next polls to bring them:
  that is the backlog case, and what makes it deterministic (if they do not come within
  :data:`STALL_S`, e.g. deleted by retention, a warning says so and the others go on);
* if the partition is caught up, the task waits up to ``task.max.idle.ms`` (default 0: not
  at all) for a producer to send more, then processes the others (possibly out of order);
* with ``--exit-at-end`` a partition at the end it had at start is never waited for (the job
  reads nothing beyond those ends anyway);
* ``task.max.idle.ms=-1`` never waits: buffered records are still merged in order, but a
  task never holds back for an empty input.

A task with one input partition is not buffered at all. A partition with more than
:data:`BUFFER_LIMIT` records buffered is left out of the consumer's assignment
(:meth:`Inputs.hold`) until its buffer drains below half of that, then sought to the offset
after its last buffered record. Not ``pause()``: kafka-python 3.0 may keep the records it
fetched for a paused partition and stop fetching it for good after ``resume()`` (seen here:
a join stalled with records of a resumed partition on the broker).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from samzapy.container.inputs import EMPTY_POLLS_AT_END, InputPartition, Inputs
from samzapy.records import Record, TopicPartition
from samzapy.streams import SystemStream

if TYPE_CHECKING:
    from samzapy.config import JobConfig

log = logging.getLogger(__name__)

#: Seconds a task waits for the records an input had below its end at start before it goes on
#: without them (they should come with the next polls; this only guards against their loss).
STALL_S = 30.0

#: Records buffered for one partition before it is held out of the assignment (Kafka
#: Streams pauses it: ``buffered.records.per.partition``); it comes back below half of this.
BUFFER_LIMIT = 5000

OrderKey = tuple[int, int, int, int, int, int]
T = TypeVar("T")


def order_key(
    bootstrap: bool, priority: int, timestamp: int, stream_index: int, partition: int, offset: int
) -> OrderKey:
    """Where a record comes in its task's delivery order: smaller keys first.

    Bootstrap streams first, then higher ``samza.priority``, then the record timestamp; ties
    by the stream's index in ``task.inputs``, the partition and the offset.

    >>> order_key(False, 0, 1000, 0, 3, 7) < order_key(False, 0, 1000, 1, 3, 2)
    True
    >>> order_key(True, 0, 9999, 1, 3, 0) < order_key(False, 5, 0, 0, 3, 0)
    True
    """
    return (-int(bootstrap), -priority, timestamp, stream_index, partition, offset)


def merge_in_order(sources: Iterable[tuple[tuple[int, int, int, int], Iterable[T]]]) -> Iterator[T]:
    """The records of several partitions in delivery order (the Spark replay's merge).

    ``sources`` are ``((bootstrap, priority, stream_index, partition), records)`` pairs, each
    ``records`` in offset order with ``timestamp`` and ``offset`` attributes. A k-way merge on
    :func:`order_key` of each partition's head, exactly what :class:`TimestampOrder` does
    when every input has its head buffered.
    """

    def keyed(rank: tuple[int, int, int, int], records: Iterable[Any]) -> Iterator[tuple[OrderKey, Any]]:
        bootstrap, priority, index, partition = rank
        for record in records:
            yield (
                order_key(bool(bootstrap), priority, record.timestamp, index, partition, record.offset),
                record,
            )

    for _, record in heapq.merge(*(keyed(rank, records) for rank, records in sources), key=lambda kv: kv[0]):
        yield record


def stream_indexes(inputs: Iterable[SystemStream]) -> dict[SystemStream, int]:
    """Each input stream's index in ``task.inputs`` (the tie-break after the timestamp)."""
    return {stream: index for index, stream in enumerate(inputs)}


class TimestampOrder:
    """The container's input source in ``task.input.order=timestamp`` mode (module doc).

    Wraps :class:`~samzapy.container.inputs.Inputs`: :meth:`poll` polls it, buffers the
    records of tasks with several assigned input partitions, and returns what may be
    processed now, as runs ``(partition, records)`` in delivery order (a partition may
    appear in several runs). Records handed out are the caller's: when the inputs are sought
    again (``Inputs.epoch``) the buffers are dropped, since the records come again from the
    tasks' positions.

    Args:
        inputs: the container's inputs.
        streams: each input stream's index in ``task.inputs``.
        max_idle_ms: ``task.max.idle.ms`` (``None``: never wait for an empty input).
        exit_at_end: the job stops at the ends its inputs had at start (``--exit-at-end``).
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        inputs: Inputs,
        streams: dict[SystemStream, int],
        max_idle_ms: int | None,
        *,
        exit_at_end: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inputs = inputs
        self._streams = streams
        self._max_idle_s = None if max_idle_ms is None else max_idle_ms / 1000
        self._exit_at_end = exit_at_end
        self._clock = clock
        self._buffers: dict[TopicPartition, deque[Record]] = {}
        self._next: dict[TopicPartition, int] = {}  # offset after the last record polled
        self._deadlines: dict[TopicPartition, float] = {}  # caught up and idle until then
        self._held: set[TopicPartition] = set()  # left out of the assignment (buffered far ahead)
        self._ranks: dict[TopicPartition, tuple[int, int, int, int]] = {}  # see _rank
        self._starved: dict[TopicPartition, float] = {}  # waited for since (records below the end)
        self._epoch = inputs.epoch
        self._more = False  # the last call stopped at max_records with records ready

    @property
    def buffered(self) -> int:
        """Records polled and not handed out yet."""
        return sum(len(b) for b in self._buffers.values())

    def poll(self, timeout_ms: int, max_records: int) -> list[tuple[InputPartition, list[Record]]]:
        """One poll of the inputs; the runs that may be processed now, in delivery order."""
        if self.inputs.epoch != self._epoch:
            self._reset()
        polled = self.inputs.poll(0 if self._more else timeout_ms, max_records)
        tasks = self._tasks()
        out: list[tuple[InputPartition, list[Record]]] = []
        for part, records in polled:
            if not records:
                continue
            self._next[part.tp] = records[-1].offset + 1
            if len(tasks.get(id(part.task), ())) == 1 and not self._buffers.get(part.tp):
                out.append((part, records))  # a task with one input: nothing to order
            else:
                self._buffers.setdefault(part.tp, deque()).extend(records)
        budget = max_records - sum(len(r) for _, r in out)
        now = self._clock()
        for parts in tasks.values():
            if budget <= 0:
                break
            budget -= self._release(parts, now, budget, out)
        self._more = budget <= 0 and self.buffered > 0
        self._hold_or_release()
        return out

    # ----------------------------------------------------------------- ordering
    def _tasks(self) -> dict[int, list[InputPartition]]:
        """The assigned input partitions, by task (in the inputs' order)."""
        tasks: dict[int, list[InputPartition]] = {}
        assigned = self.inputs.assigned
        for tp, part in self.inputs.partitions.items():
            if tp in assigned or tp in self._held:
                tasks.setdefault(id(part.task), []).append(part)
                if tp not in self._ranks:
                    self._ranks[tp] = self._rank(part)
        return tasks

    def _rank(self, part: InputPartition) -> tuple[int, int, int, int]:
        """The constant part of ``part``'s keys.

        What :func:`order_key` puts around the timestamp and offset (the bootstrap and priority
        flags already negated).
        """
        index = self._streams.get(part.ssp.system_stream, 0)
        return -int(part.bootstrap), -part.priority, index, part.tp.partition

    def _release(
        self,
        parts: list[InputPartition],
        now: float,
        budget: int,
        out: list[tuple[InputPartition, list[Record]]],
    ) -> int:
        """Move the records of one task that may be processed now to ``out``; how many.

        At most ``budget``: while every partition has a head or need not be waited for, the
        run of the partition with the smallest head, up to the next smallest head.

        The partitions empty at the start stay empty during the call (no poll in between)
        and ``now`` is fixed, so whether they must be waited for is asked once; a partition
        emptied here is asked when it empties.
        """
        heads: list[tuple[OrderKey, int, InputPartition]] = []
        for n, part in enumerate(parts):
            buffer = self._buffers.get(part.tp)
            if buffer:
                self._deadlines.pop(part.tp, None)
                self._starved.pop(part.tp, None)
                heads.append((self._key(part, buffer[0]), n, part))
            elif self._must_wait(part, now):
                return 0
        heapq.heapify(heads)
        moved = 0
        while heads and moved < budget:
            _, n, part = heapq.heappop(heads)
            run, next_key = self._take(part, heads[0][0] if heads else None, budget - moved)
            moved += len(run)
            if out and out[-1][0] is part:
                out[-1][1].extend(run)
            else:
                out.append((part, run))
            if next_key is not None:
                heapq.heappush(heads, (next_key, n, part))
            elif self._must_wait(part, now):
                break
        return moved

    def _key(self, part: InputPartition, record: Record) -> OrderKey:
        bootstrap, priority, index, number = self._ranks[part.tp]
        return (bootstrap, priority, record.timestamp, index, number, record.offset)

    def _take(
        self, part: InputPartition, limit: OrderKey | None, most: int
    ) -> tuple[list[Record], OrderKey | None]:
        """The head records of ``part`` that come before ``limit``, and the next head's key.

        At least one record, at most ``most``; the key is ``None`` when the buffer is empty.
        """
        buffer = self._buffers[part.tp]
        run = [buffer.popleft()]
        bootstrap, priority, index, number = self._ranks[part.tp]
        while buffer:
            head = buffer[0]
            key = (bootstrap, priority, head.timestamp, index, number, head.offset)
            if len(run) >= most or (limit is not None and key > limit):
                return run, key
            run.append(buffer.popleft())
        return run, None

    def _must_wait(self, part: InputPartition, now: float) -> bool:
        """Whether a task must hold back until ``part`` (nothing buffered) has its next record."""
        if self._max_idle_s is None:
            return False
        at = self._position(part)
        if at < part.start_end:
            return self._still_expected(part, at, now)  # on the broker: the next polls bring it
        if self._exit_at_end:
            return False  # nothing beyond the end at start is read: nothing to wait for
        high = self.inputs.highwater(part.tp)
        if high is not None and at < high and part.empty_polls < EMPTY_POLLS_AT_END:
            return True  # the last fetch said there is more
        deadline = self._deadlines.setdefault(part.tp, now + self._max_idle_s)
        if now < deadline:
            return True
        log.debug("%s: no record within task.max.idle.ms: processing the other inputs", part.ssp)
        return False

    def _still_expected(self, part: InputPartition, at: int, now: float) -> bool:
        """Whether the records of ``part`` below its end at start are still waited for.

        For :data:`STALL_S` at most, in case they are gone (retention deleted an unread
        backlog: the consumer then resets to the log start, which may be the end).
        """
        since = self._starved.setdefault(part.tp, now)
        if now - since < STALL_S:
            return True
        if since > float("-inf"):
            log.warning(
                "%s: no record for %.0f s although the partition was read to offset %d of the %d "
                "it had at start (deleted by retention?): the task's other inputs go on without it",
                part.ssp,
                now - since,
                at,
                part.start_end,
            )
            self._starved[part.tp] = float("-inf")  # warned once
        return False

    def _position(self, part: InputPartition) -> int:
        """The offset of the next record of ``part`` not polled yet."""
        found = self._next.get(part.tp)
        if found is not None:
            return found
        offsets = getattr(part.task, "offsets", {})
        return int(offsets.get(part.ssp, part.start_offset))

    # ----------------------------------------------------------------- buffers
    def _hold_or_release(self) -> None:
        """Hold partitions buffering too much out of the assignment; bring drained ones back.

        A partition that comes back is sought to the offset after its last buffered record.
        """
        held = {tp for tp in self._held if len(self._buffers.get(tp, ())) >= BUFFER_LIMIT // 2}
        held |= {tp for tp, buffer in self._buffers.items() if len(buffer) >= BUFFER_LIMIT}
        if held != self._held:
            position = {part.ssp: self._position(part) for part in self.inputs.partitions.values()}
            self._held = held
            self.inputs.hold(held, position)

    def _reset(self) -> None:
        """Forget what is buffered: the inputs were sought again at the tasks' positions.

        That also ended every hold; the buffered records come again.
        """
        self._held.clear()
        self._buffers.clear()
        self._next.clear()
        self._deadlines.clear()
        self._starved.clear()
        self._ranks.clear()
        self._more = False
        self._epoch = self.inputs.epoch


def input_source(job: JobConfig, inputs: Inputs, *, exit_at_end: bool) -> Inputs | TimestampOrder:
    """What the run loop polls.

    ``inputs`` itself (``task.input.order=arrival``) or the timestamp order over them.
    """
    if job.input_order != "timestamp":
        return inputs
    return TimestampOrder(inputs, stream_indexes(job.inputs), job.max_idle_ms, exit_at_end=exit_at_end)

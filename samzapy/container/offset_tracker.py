"""Which offset of one input partition may be checkpointed while messages finish out of order.

With ``task.max.concurrency`` > 1 several messages of a partition are in flight at once and
finish in any order (different keys run in parallel, retries take longer, a timed-out
message may still complete later). The checkpoint must never pass a message that has not
finished: on a restart, input resumes at the checkpointed offset, so every message below it
must be done (seed 004's "offsets committed below the lowest in-flight one").

:class:`OffsetTracker` is that bookkeeping for one partition, pure and single-threaded::

    tracker = OffsetTracker(start=120)   # the partition's checkpointed (starting) offset
    tracker.start(120)                   # message 120 taken in (queued or running)
    tracker.start(121)
    tracker.done(121)                    # 121 finished first ...
    tracker.committable()                # -> 120: 120 is still in flight
    tracker.done(120)
    tracker.committable()                # -> 122: everything started so far is done

The runner calls :meth:`OffsetTracker.start` for every message *when it takes the message
in* (before it may wait in a per-key lane), in offset order, and :meth:`OffsetTracker.done`
when the message is finished for good (processed, skipped or dead-lettered). A retry calls
``start`` again for an offset that is still in flight; it returns the attempt number, and
``done(offset, attempt=n)`` ignores a completion from an older attempt (a timed-out attempt
that finishes after its retry began), so that only the newest attempt decides.

Implementation: seed 004 keeps two min-heaps, in-flight and done, and pops both while their
tops are equal. Because offsets are taken in in increasing order, the done heap carries no
information here: the committable offset is the lowest in-flight offset, or, when nothing is
in flight, the offset after the last one taken in. So one min-heap of in-flight offsets with
lazy deletion (finished offsets are dropped when they reach the top) plus a dict of attempts
suffices; ``start``, ``done`` and ``committable`` are O(log n) amortised.

Thread safety: none; the async runner owns one tracker per partition and calls it from one
thread (or under its own lock).
"""

from __future__ import annotations

import heapq


class OffsetTracker:
    """In-flight and done offsets of one input partition; see the module docstring.

    Args:
        start: the offset the partition starts at (its checkpointed offset); what
            :meth:`committable` returns before anything is taken in.

    Invariants (checked by property tests): :meth:`committable` never exceeds the lowest
    offset in flight, every offset taken in below it is done, and it never goes back.
    """

    __slots__ = ("_attempts", "_heap", "_next", "_start")

    def __init__(self, start: int = 0) -> None:
        if start < 0:
            msg = f"start offset must be >= 0, not {start}"
            raise ValueError(msg)
        self._start = start
        self._next = start  # one past the highest offset taken in
        self._attempts: dict[int, int] = {}  # in-flight offset -> current attempt number
        self._heap: list[int] = []  # in-flight offsets; finished ones removed lazily

    def start(self, offset: int) -> int:
        """Take in the message at ``offset``, or start it again (a retry) while in flight.

        Returns:
            The attempt number: 1 for a new offset, 2, 3... for each retry.

        Raises:
            ValueError: ``offset`` is below the next new offset and not in flight (it is done
                already, or was never taken in): new offsets must come in increasing order,
                and a retry must start before the message is marked done.
        """
        attempts = self._attempts
        current = attempts.get(offset)
        if current is not None:
            attempts[offset] = current + 1
            return current + 1
        if offset < self._next:
            msg = (
                f"offset {offset} is not in flight and below the next new offset {self._next}: "
                "new offsets must be taken in in increasing order, and a retry must start "
                "before the message is marked done"
            )
            raise ValueError(msg)
        attempts[offset] = 1
        heapq.heappush(self._heap, offset)
        self._next = offset + 1
        return 1

    def done(self, offset: int, attempt: int | None = None) -> bool:
        """Mark the message at ``offset`` finished for good.

        ``attempt`` (the number :meth:`start` returned) makes the call apply only to the
        newest attempt: a late completion of a superseded attempt is ignored. Finishing an
        offset that is done already is a no-op (a timed-out attempt completing late).

        Returns:
            Whether this call finished the offset.

        Raises:
            ValueError: ``offset`` was never taken in.
        """
        current = self._attempts.get(offset)
        if current is None:
            if self._start <= offset < self._next:
                return False  # done already
            msg = f"offset {offset} was never started (taken-in offsets are {self._start}..{self._next - 1})"
            raise ValueError(msg)
        if attempt is not None and attempt != current:
            return False
        del self._attempts[offset]
        return True

    def committable(self) -> int:
        """The offset to checkpoint: the next message to process after a restart.

        The lowest offset in flight, or, when none is, the offset after the last one taken in.
        """
        lowest = self.lowest_in_flight()
        return self._next if lowest is None else lowest

    def lowest_in_flight(self) -> int | None:
        """The lowest offset taken in and not done, or ``None``."""
        heap, attempts = self._heap, self._attempts
        while heap and heap[0] not in attempts:
            heapq.heappop(heap)
        return heap[0] if heap else None

    @property
    def in_flight(self) -> int:
        """How many messages are taken in and not done."""
        return len(self._attempts)

    def attempts(self, offset: int) -> int:
        """The current attempt number of an in-flight offset (0 when it is not in flight)."""
        return self._attempts.get(offset, 0)

    def __repr__(self) -> str:
        return (
            f"OffsetTracker(committable={self.committable()}, in_flight={self.in_flight}, next={self._next})"
        )

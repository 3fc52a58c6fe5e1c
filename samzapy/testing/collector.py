"""The driver's collector and crash points.

The container's :class:`~samzapy.container.collector.TaskCollector`, keeping a copy of what the
task sent, and the named places where a test can have the driver crash in-process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from samzapy.container.collector import OutputStreams, TaskCollector
from samzapy.metrics import Counter
from samzapy.task import OutgoingMessageEnvelope
from samzapy.testing.broker import MemoryProducer

#: What a crash does to the records the producer had not acknowledged: ``lose`` them (the
#: leader never wrote them) or let them ``land`` (written, the acknowledgement never came).
Unacknowledged = Literal["lose", "land"]

#: The places :meth:`TaskHarness.crash_at <samzapy.testing.TaskHarness.crash_at>` can crash at,
#: in the order a commit passes them (the first two also between commits).
CRASH_POINTS = (
    "after-changelog-send",  # a store change handed to the producer, not acknowledged
    "after-output-send",  # an output handed to the producer, not acknowledged
    "after-producer-flush",  # a commit: every change and output acknowledged, no checkpoint yet
    "after-local-checkpoint",  # a commit: local store checkpoints taken, checkpoint not sent
    "after-checkpoint-send",  # a commit: checkpoint sent, not acknowledged
)


class Crash(BaseException):
    """Raised at an armed crash point.

    The driver catches it and crashes (a ``BaseException``, so that no ``except Exception`` of
    the runtime or the task stops it, as none stops SIGKILL).
    """

    def __init__(self, point: str, unacknowledged: Unacknowledged) -> None:
        super().__init__(point)
        self.point = point
        self.unacknowledged = unacknowledged


@dataclass
class _Armed:
    remaining: int
    unacknowledged: Unacknowledged


class CrashPoints:
    """The armed crash points of one driver."""

    def __init__(self) -> None:
        self._armed: dict[str, _Armed] = {}
        self._suspended = False

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Points reached inside do not count.

        A restart's restore writes to the changelog: the driver does not crash there; the
        subprocess crash tests cover restores.
        """
        self._suspended = True
        try:
            yield
        finally:
            self._suspended = False

    def arm(self, point: str, after: int, unacknowledged: Unacknowledged) -> None:
        """Crash the ``after``-th time ``point`` is reached from now.

        Raises:
            ValueError: an unknown point, ``after`` below 1 or an unknown ``unacknowledged``.
        """
        if point not in CRASH_POINTS:
            msg = f"unknown crash point {point!r}: the driver's points are {', '.join(CRASH_POINTS)}"
            raise ValueError(msg)
        if after < 1:
            msg = f"after must be >= 1 (the n-th time the point is reached), got {after}"
            raise ValueError(msg)
        if unacknowledged not in ("lose", "land"):
            msg = f"unacknowledged must be 'lose' or 'land', got {unacknowledged!r}"
            raise ValueError(msg)
        self._armed[point] = _Armed(after, unacknowledged)

    def reach(self, point: str) -> None:
        """Execution reached ``point``: raise :class:`Crash` if it is armed and due."""
        armed = self._armed.get(point)
        if armed is None or self._suspended:
            return
        armed.remaining -= 1
        if armed.remaining <= 0:
            del self._armed[point]
            raise Crash(point, armed.unacknowledged)

    @property
    def armed(self) -> list[str]:
        """The points still armed."""
        return list(self._armed)


class RecordingCollector(TaskCollector):
    """The container's collector, keeping a copy of each envelope the task sent.

    It serialises, partitions, stamps ``samzapy.id`` and produces as the container's does, and
    also keeps each envelope sent (its ``id`` set to the one it was sent with) in
    :attr:`outputs` and its bytes in :attr:`serialized`; ``window()`` calls are numbered by the
    driver's wall clock instead of the machine's, so their output ids repeat in a rerun.

    Args:
        task_name: the task's name (``Partition N``).
        producer: the driver's producer.
        outputs: the output streams' serdes and partition counts.
        outputs_kept: where envelopes are kept (the driver's, across restarts).
        serialized_kept: where their (key, value) bytes are kept.
        wall_clock_ms: the driver's wall clock.
        crash_points: reached at ``after-output-send``.
        drop_producer_errors: ``task.drop.producer.errors``.
        dropped: the counter of dropped outputs.
    """

    def __init__(
        self,
        task_name: str,
        producer: MemoryProducer,
        outputs: OutputStreams,
        *,
        outputs_kept: list[OutgoingMessageEnvelope],
        serialized_kept: list[tuple[Any, Any]],
        wall_clock_ms: Any,
        crash_points: CrashPoints,
        drop_producer_errors: bool = False,
        dropped: Counter | None = None,
    ) -> None:
        super().__init__(
            task_name, producer, outputs, drop_producer_errors=drop_producer_errors, dropped=dropped
        )
        self._memory = producer
        self.outputs = outputs_kept
        self.serialized = serialized_kept
        self._wall_clock_ms = wall_clock_ms
        self._crash_points = crash_points

    def begin(self, stream: str, origin: int | str) -> None:
        """As the container's, with the driver's wall clock for ``window()`` calls."""
        super().begin(stream, self._wall_clock_ms() if stream == "window" else origin)

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        """Send as the container does, then keep the envelope and its bytes."""
        sent = self.sent
        super().send(envelope)
        record = self._memory.last_sent
        if self.sent == sent or record is None:
            return  # dropped (task.drop.producer.errors)
        if envelope.id is None:
            envelope.id = record.id
        self.outputs.append(envelope)
        self.serialized.append((record.key, record.value))
        self._crash_points.reach("after-output-send")

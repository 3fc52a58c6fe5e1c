"""The container's input side.

One consumer with manual ``assign()``, starting offsets, bootstrap streams, priorities and
"reached the end it had at start" detection.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samzapy.kafka.consumer import Consumer
from samzapy.records import Record, TopicPartition
from samzapy.streams import SystemStreamPartition

if TYPE_CHECKING:
    from samzapy.container.task_instance import TaskInstance

log = logging.getLogger(__name__)

#: Consecutive polls without records, at or past the reported end offset, after which a
#: partition counts as read to its end. The dev broker undercounts end offsets (DESIGN §10),
#: so the reported end alone is only a lower bound.
EMPTY_POLLS_AT_END = 2


@dataclass
class InputPartition:
    """One assigned input partition and what the container knows of its progress."""

    ssp: SystemStreamPartition
    tp: TopicPartition
    task: TaskInstance
    priority: int
    bootstrap: bool
    start_offset: int
    start_end: int
    empty_polls: int = 0
    caught_up: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Inputs:
    """Feeds each task its messages, in offset order per partition.

    A *bootstrap* stream of a task is read up to the end it had when the task started
    before any other input of that task is delivered (the others are not read yet). Among
    records of one poll, streams of higher ``samza.priority`` are delivered first.
    """

    def __init__(self, consumer: Consumer, partitions: list[InputPartition]) -> None:
        self.consumer = consumer
        self.partitions = {p.tp: p for p in partitions}
        self._order = {p.tp: (-int(p.bootstrap), -p.priority, p.tp.topic, p.tp.partition) for p in partitions}
        self._assigned: set[TopicPartition] = set()
        #: Partitions left out of the assignment for now (:meth:`hold`).
        self._held: set[TopicPartition] = set()
        #: Bumped whenever every partition is sought again (a task came or went): records
        #: polled before then and not handed out yet come again, and must not be handed out.
        self.epoch = 0
        self._reassign({})

    def _reassign(self, position: dict[SystemStreamPartition, int], *, force: bool = False) -> None:
        """Assign every partition except the non-bootstrap inputs of tasks still bootstrapping.

        Held-back partitions are left out of the assignment rather than paused: kafka-python
        3.0 can keep the records it fetched for a paused partition and never hand them back
        after ``resume()``, which would skip messages. A partition (re)joining the
        assignment is seeked to its task's position, so nothing is skipped or repeated.
        """
        if force:
            self._held = set()  # every partition is sought again: nothing is buffered ahead any more
        waiting = {id(p.task) for p in self.partitions.values() if p.bootstrap and not p.caught_up}
        wanted = {tp for tp, p in self.partitions.items() if p.bootstrap or id(p.task) not in waiting}
        wanted -= self._held
        if wanted == self._assigned and not force:
            return
        previous = set() if force else self._assigned
        self.epoch += int(force)
        self.consumer.assign(sorted(wanted))
        for tp in wanted - previous:
            part = self.partitions[tp]
            self.consumer.seek(tp, position.get(part.ssp, part.start_offset))
            if previous and not part.bootstrap:
                log.info("%s: bootstrap streams caught up; delivering %s", part.task.task_name, part.ssp)
        self._assigned = wanted

    def hold(self, held: set[TopicPartition], position: dict[SystemStreamPartition, int]) -> None:
        """Leave ``held`` out of the assignment, until a later call leaves them out of ``held``.

        For partitions whose records are buffered far ahead of their task's other inputs
        (samzapy/container/input_order.py). A partition that comes back is sought to
        ``position`` (the offset after what its reader holds), as any partition (re)joining.
        """
        self._held = set(held)
        self._reassign(position)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The end offset the last fetch of ``tp`` reported, ``None`` if unknown.

        ``None`` before a fetch, or while ``tp`` is not assigned (a held or bootstrap-waiting
        input), where kafka-python raises IllegalStateError.
        """
        return self.consumer.highwater(tp) if tp in self._assigned else None

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        """The partitions read now (a bootstrapping task's other inputs are not)."""
        return frozenset(self._assigned)

    def drop_tasks(self, kept: list[TaskInstance], position: dict[SystemStreamPartition, int]) -> None:
        """Stop reading the partitions of every task not in ``kept`` (e.g. fenced ones).

        The partitions kept continue from ``position`` (records polled but not processed come
        again).
        """
        self.partitions = {tp: p for tp, p in self.partitions.items() if p.task in kept}
        self._reassign(position, force=True)

    def add(self, partitions: list[InputPartition], position: dict[SystemStreamPartition, int]) -> None:
        """Start reading ``partitions`` too (a task that joined at runtime).

        The partitions read already continue from ``position``.
        """
        for part in partitions:
            self.partitions[part.tp] = part
            self._order[part.tp] = (-int(part.bootstrap), -part.priority, part.tp.topic, part.tp.partition)
        self._reassign(position, force=True)

    def poll(self, timeout_ms: int, max_records: int) -> list[tuple[InputPartition, list[Record]]]:
        """One poll: the records per partition in delivery order (bootstrap, then priority)."""
        if not self._assigned:  # a member with no task yet: kafka-python refuses to poll nothing
            time.sleep(timeout_ms / 1000)
            return []
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        for tp, part in self.partitions.items():
            if tp in polled:
                part.empty_polls = 0
            elif tp in self._assigned:
                part.empty_polls += 1
        batches = [(self.partitions[tp], records) for tp, records in polled.items()]
        batches.sort(key=lambda item: self._order[item[0].tp])
        return batches

    def note_progress(self, position: dict[SystemStreamPartition, int]) -> None:
        """Update "caught up" flags after processing; resume inputs whose bootstraps are done."""
        changed = False
        for part in self.partitions.values():
            at = position.get(part.ssp, part.start_offset)
            if part.extra.get("intermediate"):
                # An intermediate stream grows while the job runs (its own tasks write it): it is
                # caught up only while read to the end the consumer last saw and quiet, never for
                # good, so --exit-at-end reads back what the job wrote (issue 29).
                high = self.highwater(part.tp) or 0
                part.caught_up = (
                    part.tp not in self._held  # held: its reader buffers records not processed yet
                    and at >= max(part.start_end, high)
                    and part.empty_polls >= EMPTY_POLLS_AT_END
                )
                continue
            if part.caught_up:
                continue
            if at >= part.start_end and part.empty_polls >= EMPTY_POLLS_AT_END:
                part.caught_up = True
                changed = changed or part.bootstrap
                if part.bootstrap:
                    log.info("%s: bootstrap stream %s read to offset %d", part.task.task_name, part.ssp, at)
        if changed:
            self._reassign(position)

    def all_caught_up(self) -> bool:
        """Whether every partition has been processed up to the end it had at start."""
        return all(p.caught_up for p in self.partitions.values())

    def lag(self, position: dict[SystemStreamPartition, int]) -> dict[str, int]:
        """Per input stream, the summed lag (high watermark minus position) of its partitions."""
        lags: dict[str, int] = {}
        for tp, part in self.partitions.items():
            high = self.highwater(tp)
            if high is None:
                high = part.start_end
            behind = max(0, high - position.get(part.ssp, part.start_offset))
            name = f"{part.ssp.system}.{part.ssp.stream}"
            lags[name] = lags.get(name, 0) + behind
        return lags

"""Reading and rewriting a job's checkpoints: the library behind ``samzapy checkpoint``.

:class:`CheckpointAdmin` shows, per task, where each input partition will resume, how far
behind the partition's end that is, and which changelog offset each store is restored to;
and it plans and writes new checkpoints that move the *input* offsets (to given offsets, to
a timestamp, to the oldest or to the upcoming message) for replays and incident repair.

Changelog offsets are kept as they are: the stores keep their state, only input is rewound
or skipped. Rewinding therefore processes messages again on top of state that already
counts them (replay into a fresh job, or wipe the state, when that matters). The job must
be stopped: a running container overwrites the checkpoints at its next commit.

Offsets by time: Kafka's ``offsets_for_times`` answers "the earliest offset whose timestamp
is >= T". The dev broker answers offset 0 whatever T is (DESIGN.md §10), so every answer is
checked against the records themselves (the record at the offset has a timestamp >= T, the
one before it < T) and, when wrong, the offset is found by a binary search over the
partition's records instead (about log2(n) small fetches; it assumes timestamps grow with
offsets, as they do for one producer's CreateTime).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoints
from samzapy.config import JobConfig
from samzapy.errors import BadArgumentError, CheckpointError
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.records import Record, TopicPartition
from samzapy.streams import SystemStreamPartition, task_name_for

log = logging.getLogger(__name__)

#: Small fetches for probing single records (a fetch still returns at least one batch).
_PROBE_FETCH_BYTES = 64 * 1024


class CheckpointTargetError(CheckpointError, BadArgumentError):
    """A ``checkpoint set`` target names a partition or offset the job does not have."""


@dataclass(frozen=True)
class InputState:
    """One input partition of a task: where it resumes and where it ends."""

    ssp: SystemStreamPartition
    offset: int | None  # checkpointed next offset; None: no checkpoint (samza.offset.default)
    oldest: int
    end: int  # the true end: the offset after the last record

    @property
    def lag(self) -> int | None:
        """Messages between the checkpoint and the end (``None`` without a checkpoint)."""
        return None if self.offset is None else max(0, self.end - self.offset)


@dataclass(frozen=True)
class ChangelogState:
    """One store of a task: the changelog offset its state is restored to."""

    store: str
    offset: int | None  # last changelog record of the committed state; None: none
    last: int | None  # the changelog partition's last record; None: empty


@dataclass(frozen=True)
class TaskState:
    """What ``checkpoint show`` prints for one task."""

    task_name: str
    checkpointed: bool
    generation: int
    inputs: list[InputState] = field(default_factory=list)
    changelogs: list[ChangelogState] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (streams as ``system.stream.partition`` strings)."""
        return {
            "task": self.task_name,
            "checkpointed": self.checkpointed,
            "generation": self.generation,
            "inputs": {
                str(i.ssp): {"offset": i.offset, "oldest": i.oldest, "end": i.end, "lag": i.lag}
                for i in self.inputs
            },
            "changelogs": {c.store: {"offset": c.offset, "last": c.last} for c in self.changelogs},
        }


@dataclass(frozen=True)
class Target:
    """Where ``checkpoint set`` moves input offsets: exactly one of the fields is set."""

    offsets: dict[SystemStreamPartition, int] | None = None
    timestamp_ms: int | None = None
    oldest: bool = False
    upcoming: bool = False

    def describe(self) -> str:
        """For messages: ``to offsets ...``, ``to timestamp T``, ``to the oldest``..."""
        if self.offsets is not None:
            return "to " + ", ".join(f"{ssp}={o}" for ssp, o in sorted(self.offsets.items()))
        if self.timestamp_ms is not None:
            return f"to timestamp {self.timestamp_ms}"
        return "to the oldest offsets" if self.oldest else "to the upcoming offsets"


@dataclass(frozen=True)
class Change:
    """A planned checkpoint: the task's old one (``None``: it had none) and the new one."""

    old: TaskCheckpoint | None
    new: TaskCheckpoint


class CheckpointAdmin:
    """Reads and writes the checkpoints of ``job`` on the brokers at ``bootstrap_servers``.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, job: JobConfig, bootstrap_servers: str) -> None:
        self.job = job
        self.servers = bootstrap_servers
        self._admin = TopicAdmin(bootstrap_servers)
        self._consumer = reader_consumer(
            bootstrap_servers,
            max_partition_fetch_bytes=_PROBE_FETCH_BYTES,
            fetch_max_bytes=_PROBE_FETCH_BYTES,
            max_poll_records=500,
        )
        self._ends: dict[TopicPartition, int] = {}

    def __enter__(self) -> CheckpointAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the broker connections."""
        self._consumer.close()
        self._admin.close()

    # ------------------------------------------------------------------ the job's tasks
    def task_inputs(self) -> dict[str, list[SystemStreamPartition]]:
        """Every task of the job (GroupByPartition) and its input partitions.

        Raises:
            CheckpointError: an input stream does not exist.
        """
        counts: dict[Any, int] = {}
        for stream in self.job.inputs:
            count = self._admin.partition_count(stream.stream)
            if count is None:
                msg = f"input stream '{stream}' of job '{self.job.job_name}' does not exist on {self.servers}"
                raise CheckpointError(msg)
            counts[stream] = count
        tasks = max(counts.values(), default=0)
        return {
            task_name_for(p): [
                SystemStreamPartition(s.system, s.stream, p) for s, count in counts.items() if p < count
            ]
            for p in range(tasks)
        }

    def checkpoints(self) -> dict[str, TaskCheckpoint]:
        """The newest checkpoint of every task (empty when the job never committed)."""
        if self._admin.partition_count(self.job.checkpoint_topic) is None:
            return {}
        return read_checkpoints(self.servers, self.job.checkpoint_topic)

    # ------------------------------------------------------------------ offsets
    def oldest(self, tp: TopicPartition) -> int:
        """The partition's first offset."""
        return self._consumer.beginning_offsets([tp])[tp]

    def end(self, tp: TopicPartition) -> int:
        """The partition's true end (the offset after its last record).

        The reported end is a lower bound here (the dev broker reports the last batch's base
        offset + 1): the records from the one before it are read to the true end, which on
        a real Kafka is one record.
        """
        if tp not in self._ends:
            reported = self._consumer.end_offsets([tp])[tp]
            start = max(self.oldest(tp), reported - 1)
            end = reported
            for batch in read_partition(self._consumer, tp, start):
                end = max(end, batch[-1].offset + 1)
            self._ends[tp] = end
        return self._ends[tp]

    def _first_record(self, tp: TopicPartition, offset: int, stop: int) -> list[Record]:
        """The first fetched batch of records at or after ``offset`` and below ``stop``."""
        for batch in read_partition(self._consumer, tp, offset, stop):
            if batch:
                return batch
        return []

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> int:
        """The earliest offset of ``tp`` whose record has a timestamp >= ``timestamp_ms``.

        The end when there is none (see the module docstring on the broker's answer).
        """
        oldest, end = self.oldest(tp), self.end(tp)
        answer = self._consumer.offsets_for_times({tp: timestamp_ms}).get(tp)
        candidate = end if answer is None else answer.offset
        if self._is_boundary(tp, candidate, timestamp_ms, oldest, end):
            return candidate
        log.info(
            "%s: the broker's offsets_for_times(%d) answer (offset %s) is not the first record at or "
            "after that time; searching the records instead",
            f"{tp.topic}/{tp.partition}",
            timestamp_ms,
            candidate,
        )
        return self._search_time(tp, timestamp_ms, oldest, end)

    def _is_boundary(self, tp: TopicPartition, offset: int, ts: int, oldest: int, end: int) -> bool:
        if not oldest <= offset <= end:
            return False
        if offset < end:
            at = self._first_record(tp, offset, offset + 1)
            if not at or at[0].offset != offset or at[0].timestamp < ts:
                return False
        if offset == oldest:
            return True
        before = self._first_record(tp, offset - 1, offset)
        return bool(before) and before[0].offset == offset - 1 and before[0].timestamp < ts

    def _search_time(self, tp: TopicPartition, ts: int, lo: int, hi: int) -> int:
        """Binary search in ``[lo, hi]``.

        Offsets below ``lo`` are known to be < ``ts``, and ``hi`` is the end or an offset whose
        record is >= ``ts``.
        """
        while lo < hi:
            mid = (lo + hi) // 2
            batch = self._first_record(tp, mid, hi)
            if not batch:
                hi = mid  # no record in [mid, hi): seeking to mid lands on hi's record
                continue
            first_late = next((r for r in batch if r.timestamp >= ts), None)
            if first_late is None:
                lo = batch[-1].offset + 1
            elif first_late is batch[0]:
                hi = first_late.offset
            else:
                return first_late.offset  # the record before it in the batch is earlier than ts
        return lo

    # ------------------------------------------------------------------ show
    def show(self) -> list[TaskState]:
        """Every task's checkpoint, input lag and changelog offsets."""
        checkpoints = self.checkpoints()
        states = []
        for task_name, ssps in self.task_inputs().items():
            checkpoint = checkpoints.get(task_name)
            partition = int(task_name.rsplit(" ", 1)[1])
            inputs = []
            for ssp in ssps:
                tp = TopicPartition(ssp.stream, ssp.partition)
                offset = checkpoint.input_offsets.get(ssp) if checkpoint else None
                inputs.append(InputState(ssp, offset, self.oldest(tp), self.end(tp)))
            changelogs = []
            for store in self.job.stores.values():
                offset = checkpoint.changelog_offsets.get(store.name) if checkpoint else None
                last = None
                if store.changelog is not None and self._admin.partition_count(store.changelog.stream):
                    end = self.end(TopicPartition(store.changelog.stream, partition))
                    last = end - 1 if end > 0 else None
                changelogs.append(ChangelogState(store.name, offset, last))
            states.append(
                TaskState(
                    task_name,
                    checkpoint is not None,
                    checkpoint.generation if checkpoint else 0,
                    inputs,
                    changelogs,
                )
            )
        return states

    # ------------------------------------------------------------------ set
    def plan(self, target: Target) -> list[Change]:
        """The checkpoints that :meth:`write` would write for ``target``.

        Every task's changelog offsets (and generation) stay as they are; only input offsets
        move. With explicit offsets only the named partitions move, and a task is only
        rewritten when one of its partitions is named.

        Raises:
            CheckpointTargetError: a named partition is not an input of the job, or an offset
                lies outside the partition's [oldest, end].
        """
        tasks = self.task_inputs()
        checkpoints = self.checkpoints()
        if target.offsets is not None:
            self._check_offsets(tasks, target.offsets)
        changes = []
        for task_name, ssps in tasks.items():
            old = checkpoints.get(task_name)
            targets = {ssp: self._target_offset(ssp, target) for ssp in ssps}
            moved = {ssp: o for ssp, o in targets.items() if o is not None}
            if not moved:
                continue
            base = old or TaskCheckpoint(task_name)
            new = replace(base, input_offsets={**base.input_offsets, **moved})
            changes.append(Change(old, new))
        return changes

    def _target_offset(self, ssp: SystemStreamPartition, target: Target) -> int | None:
        tp = TopicPartition(ssp.stream, ssp.partition)
        if target.offsets is not None:
            return target.offsets.get(ssp)
        if target.timestamp_ms is not None:
            return self.offset_for_time(tp, target.timestamp_ms)
        return self.oldest(tp) if target.oldest else self.end(tp)

    def _check_offsets(
        self, tasks: dict[str, list[SystemStreamPartition]], offsets: dict[SystemStreamPartition, int]
    ) -> None:
        known = {ssp for ssps in tasks.values() for ssp in ssps}
        for ssp, offset in offsets.items():
            if ssp not in known:
                inputs = ", ".join(str(s) for s in self.job.inputs)
                example = min(known) if known else "kafka.in.0"
                msg = (
                    f"'{ssp}' is not an input partition of job '{self.job.job_name}': its inputs are "
                    f"{inputs} (write system.stream.partition, e.g. {example})"
                )
                raise CheckpointTargetError(msg)
            tp = TopicPartition(ssp.stream, ssp.partition)
            oldest, end = self.oldest(tp), self.end(tp)
            if not oldest <= offset <= end:
                msg = f"offset {offset} for '{ssp}' is outside the partition: must be from {oldest} to {end}"
                raise CheckpointTargetError(msg)

    def write(self, changes: list[Change]) -> None:
        """Write the planned checkpoints and wait for their acknowledgement."""
        if not changes:
            return
        self._admin.ensure_topic(
            self.job.checkpoint_topic, 1, compact=True, replication_factor=self.job.replication_factor
        )
        producer = Producer(self.servers, {"client_id": "samzapy-checkpoint-tool"})
        try:
            writer = CheckpointWriter(producer, self.job.checkpoint_topic)
            for change in changes:
                writer.write(change.new)
            producer.flush()
        finally:
            producer.close()

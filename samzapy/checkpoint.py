"""Checkpoints in Kafka: per task, each input partition's next offset and each store's
changelog offset, in one record so that they can never disagree.

The checkpoint topic is Samza's ``__samza_checkpoint_ver_1_for_<job>_<id>``: one partition,
compacted, keyed by task name.

Which record is a task's checkpoint (:class:`CheckpointFold`, used by every reader: restore,
standbys, fencing, the checkpoint tool, the Spark restore): the newest record of the *highest
ownership generation*, never a later record of a lower one. A zombie container (stopped, then
resumed after another container took its tasks over) may still land a checkpoint after the
takeover; it carries the old generation and is ignored. Within one generation, the first
record names its owner (the claimant, see :mod:`samzapy.container.fencing`): a record of that
generation from another claimant (a claim that lost a race) is ignored too.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samzapy.errors import CheckpointError
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.streams import SystemStreamPartition

if TYPE_CHECKING:
    from samzapy.records import RecordSink

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 2
#: The header every changelog record carries: its writer's ownership generation (ASCII digits).
GENERATION_HEADER = "samzapy.generation"


def generation_header(generation: int) -> list[tuple[str, bytes]]:
    """The headers of a changelog record written by ownership ``generation``."""
    return [(GENERATION_HEADER, str(generation).encode())]


def record_generation(record: Any) -> int | None:
    """The writer's generation a consumed changelog record carries (``None``: no header, a
    record of a samzapy without generation headers)."""
    for name, value in record.headers or ():
        if name == GENERATION_HEADER and value:
            return int(value)
    return None


@dataclass(frozen=True)
class ChangelogFence:
    """Which changelog records of a store a reader skips: those after offset ``start`` written
    by a generation below ``generation`` (a zombie's, landed after the takeover).

    ``start`` is the changelog offset the owning generation claimed the task at (``None``:
    the changelog had no committed record then); records up to it are all taken. A zombie's
    records *before* it were undone by that generation's restore (the trim, which also
    rewrites the keys of the records it skipped), so "everything up to ``start``, then only
    the owner's generation and above" is the committed state.

    >>> class R:
    ...     def __init__(self, offset, gen): self.offset, self.headers = offset, generation_header(gen)
    >>> fence = ChangelogFence(start=10, generation=2)
    >>> fence.skips(R(9, 1)), fence.skips(R(11, 1)), fence.skips(R(11, 2)), fence.skips(R(12, 3))
    (False, True, False, False)
    """

    start: int | None
    generation: int

    def skips(self, record: Any) -> bool:
        """Whether a reader must ignore ``record``."""
        if self.start is not None and record.offset <= self.start:
            return False
        written_by = record_generation(record)
        return written_by is not None and written_by < self.generation


@dataclass
class TaskCheckpoint:
    """What a task has durably done.

    Attributes:
        task_name: ``Partition N``.
        input_offsets: per input partition, the offset of the next message to process.
        changelog_offsets: per store, the offset of the last changelog record that belongs
            to the committed state (``None``: the changelog holds no committed record).
        generation: the ownership generation that wrote it (fencing of zombie writers).
        claimant: the container instance that claimed ``generation`` (``None``: written by a
            tool or by a samzapy without claimants; such records are not filtered by owner).
        fence_generation: the generation whose changelog rule applies to this checkpoint's
            state (see :meth:`fence_for`; 0: none, every record up to the offset counts).
        fence_offsets: per store, the changelog offset ``fence_generation`` claimed at.
        snapshots: per store, the newest complete snapshot in the blob store (its index
            name, ``stores/snapshot_index.py``) when the checkpoint was written; stores without
            snapshots are absent. Older readers ignore it.
    """

    task_name: str
    input_offsets: dict[SystemStreamPartition, int] = field(default_factory=dict)
    changelog_offsets: dict[str, int | None] = field(default_factory=dict)
    generation: int = 0
    claimant: str | None = None
    fence_generation: int = 0
    fence_offsets: dict[str, int | None] = field(default_factory=dict)
    snapshots: dict[str, str] = field(default_factory=dict)

    def fence_for(self, store: str) -> ChangelogFence | None:
        """The rule a reader of ``store``'s changelog applies to reach this checkpoint's state
        (``None``: take every record up to the checkpointed offset)."""
        if not self.fence_generation:
            return None
        return ChangelogFence(self.fence_offsets.get(store), self.fence_generation)

    def to_bytes(self) -> bytes:
        """The record value written to the checkpoint topic (JSON)."""
        body = {
            "version": CHECKPOINT_VERSION,
            "task": self.task_name,
            "inputs": {str(ssp): offset for ssp, offset in sorted(self.input_offsets.items())},
            "changelogs": dict(sorted(self.changelog_offsets.items())),
            "generation": self.generation,
        }
        if self.claimant is not None:
            body["claimant"] = self.claimant
        if self.fence_generation:
            body["fence"] = {
                "generation": self.fence_generation,
                "changelogs": dict(sorted(self.fence_offsets.items())),
            }
        if self.snapshots:
            body["snapshots"] = dict(sorted(self.snapshots.items()))
        return json.dumps(body).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "") -> TaskCheckpoint:
        """Parse a record value written by :meth:`to_bytes`.

        Raises:
            CheckpointError: the bytes are not a checkpoint of a known version.
        """
        try:
            body: dict[str, Any] = json.loads(data)
            if body.get("version") not in (1, CHECKPOINT_VERSION):
                msg = f"unknown checkpoint version {body.get('version')!r}"
                raise ValueError(msg)
            return cls(
                task_name=str(body["task"]),
                input_offsets={
                    SystemStreamPartition.parse(k): int(v) for k, v in body.get("inputs", {}).items()
                },
                changelog_offsets={
                    str(k): (None if v is None else int(v)) for k, v in body.get("changelogs", {}).items()
                },
                generation=int(body.get("generation", 0)),
                claimant=None if body.get("claimant") is None else str(body["claimant"]),
                fence_generation=int(body.get("fence", {}).get("generation", 0)),
                fence_offsets={
                    str(k): (None if v is None else int(v))
                    for k, v in body.get("fence", {}).get("changelogs", {}).items()
                },
                snapshots={str(k): str(v) for k, v in body.get("snapshots", {}).items()},
            )
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"unreadable checkpoint {where}: {exc}"
            raise CheckpointError(msg) from exc


class CheckpointFold:
    """Folds the records of a checkpoint topic, in log order, into each task's checkpoint.

    The rules (the module docstring says why), for a record of task T and generation G:

    1. G below the highest generation of T taken so far: ignored (a fenced zombie's record);
    2. the first record of (T, G) names G's owner, its claimant; a later record of (T, G) with
       another claimant is ignored (a claim that lost the race for G). Records without a
       claimant (tools, older samzapy) neither name an owner nor are filtered by one;
    3. otherwise the record is T's checkpoint (the newest of the highest generation).

    A tombstone removes T's checkpoint but not what was learnt about its generations.

    >>> fold = CheckpointFold()
    >>> for gen, who, offset in [(1, "a", 10), (2, "b", 12), (1, "a", 11), (2, "c", 10), (2, "b", 13)]:
    ...     _ = fold.add(TaskCheckpoint("Partition 0", {}, {"s": offset}, gen, who))
    >>> cp = fold.checkpoints["Partition 0"]
    >>> cp.generation, cp.claimant, cp.changelog_offsets
    (2, 'b', {'s': 13})
    >>> fold.owner("Partition 0", 2), fold.highest_seen("Partition 0")
    ('b', 2)
    """

    def __init__(self) -> None:
        self.checkpoints: dict[str, TaskCheckpoint] = {}
        self._taken: dict[str, int] = {}  # task -> highest generation taken
        self._seen: dict[str, int] = {}  # task -> highest generation in any record
        self._owners: dict[tuple[str, int], str | None] = {}  # (task, generation) -> claimant

    def add(self, checkpoint: TaskCheckpoint) -> bool:
        """Fold in the next record of the log; returns whether it is now its task's checkpoint."""
        name, generation = checkpoint.task_name, checkpoint.generation
        self._seen[name] = max(self._seen.get(name, generation), generation)
        owner = self._owners.setdefault((name, generation), checkpoint.claimant)
        if generation < self._taken.get(name, generation):
            return False  # rule 1
        if owner is not None and checkpoint.claimant is not None and checkpoint.claimant != owner:
            return False  # rule 2
        self._taken[name] = generation
        self.checkpoints[name] = checkpoint
        return True

    def remove(self, task_name: str) -> None:
        """A tombstone of ``task_name``: it has no checkpoint from now on."""
        self.checkpoints.pop(task_name, None)

    def owner(self, task_name: str, generation: int) -> str | None:
        """The claimant of the first record of ``generation`` of the task (``None``: no such
        record, or it had no claimant)."""
        return self._owners.get((task_name, generation))

    def highest_seen(self, task_name: str) -> int:
        """The highest generation of the task in any record folded in (0: none)."""
        return self._seen.get(task_name, 0)

    def add_record(self, record: Any, topic: str) -> TaskCheckpoint | None:
        """Fold in one consumed record of ``topic``; returns its checkpoint when it became its
        task's (``None`` for a key-less record, a tombstone or an ignored record)."""
        if record.key is None:
            return None
        if record.value is None:
            self.remove(record.key.decode())
            return None
        checkpoint = TaskCheckpoint.from_bytes(record.value, f"{topic}/0@{record.offset}")
        return checkpoint if self.add(checkpoint) else None


def read_checkpoints(bootstrap_servers: str, topic: str) -> dict[str, TaskCheckpoint]:
    """Every task's checkpoint in ``topic`` (:class:`CheckpointFold`'s rules; empty when the
    topic is empty)."""
    from samzapy.records import TopicPartition

    consumer = reader_consumer(bootstrap_servers)
    fold = CheckpointFold()
    try:
        for batch in read_partition(consumer, TopicPartition(topic, 0), 0):
            for record in batch:
                fold.add_record(record, topic)
    finally:
        consumer.close()
    log.debug("read %d task checkpoints from %s", len(fold.checkpoints), topic)
    return fold.checkpoints


class CheckpointWriter:
    """Writes task checkpoints through the container's producer.

    ``write`` does not wait: the caller flushes the producer afterwards, so that a commit
    costs one round trip for all of its tasks.
    """

    def __init__(self, producer: RecordSink, topic: str) -> None:
        self._producer = producer
        self.topic = topic

    def write(self, checkpoint: TaskCheckpoint) -> None:
        """Queue ``checkpoint`` as the newest record of its task."""
        self._producer.send(self.topic, checkpoint.task_name.encode(), checkpoint.to_bytes(), partition=0)

    def flush(self) -> None:
        """Wait until everything queued through the producer is acknowledged."""
        self._producer.flush()

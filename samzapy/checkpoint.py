"""Checkpoints in Kafka.

Per task, each input partition's next offset and each store's changelog offset, in one record so
that they can never disagree.

The checkpoint topic is Samza's ``__samza_checkpoint_ver_1_for_<job>_<id>``: one partition,
compacted.

Which record is a task's checkpoint (:class:`CheckpointFold`, used by every reader: restore,
standbys, fencing, the checkpoint tool, the Spark restore): the newest record of the *highest
ownership generation*, never a later record of a lower one. A zombie container (stopped, then
resumed after another container took its tasks over) may still land a checkpoint after the
takeover; it carries the old generation and is ignored. Within one generation, the first
claim names its owner (the claimant, see :mod:`samzapy.container.fencing`): a record of that
generation from another claimant (a claim that lost a race) is ignored too.

Keys, and why (issue 28 item 1): Kafka's compaction keeps only the newest record of each key.
Keyed by task name alone (samzapy before issue 28), a zombie's record of generation 1 landing
after the owner's last one of generation 2 would, once compacted, be the task's only record: a
restart would restore the zombie's older state. So a record's key is
``<task>#<generation>#<claimant>`` (:func:`checkpoint_key`): compaction keeps the newest record
of every generation and claimant, and never leaves a lower generation as a task's only record.
The keys of lower generations (and of claims that lost a race) are tombstoned by the owner once
its first commit is durable (:attr:`TaskCheckpoint.supersedes`), so the topic holds about one
key per task. A record names the offset of its writer's claim (``claim_offset``), so the first
claim of a generation is known even after compaction removed the claim record itself.

Readers fold records by the key their *value* implies (task, generation, claimant), whatever key
they were written with, so topics written by an older samzapy (keyed by task name) read as
before; a tombstone removes the records written with its key, as compaction would.
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
#: Separates task, generation and claimant in a checkpoint record's key.
KEY_SEPARATOR = "#"
#: The header every changelog record carries: its writer's ownership generation (ASCII digits).
GENERATION_HEADER = "samzapy.generation"


def generation_header(generation: int) -> list[tuple[str, bytes]]:
    """The headers of a changelog record written by ownership ``generation``."""
    return [(GENERATION_HEADER, str(generation).encode())]


def record_generation(record: Any) -> int | None:
    """The writer's generation a consumed changelog record carries.

    ``None``: no header, a record of a samzapy without generation headers.
    """
    for name, value in record.headers or ():
        if name == GENERATION_HEADER and value:
            return int(value)
    return None


@dataclass(frozen=True)
class ChangelogFence:
    """Which changelog records of a store a reader skips.

    Those after offset ``start`` written by a generation below ``generation`` (a zombie's,
    landed after the takeover).

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
        claim_offset: the offset of the claim record of ``generation`` by ``claimant`` in the
            checkpoint topic (``None``: this record is the claim, or no claimant wrote it).
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
    claim_offset: int | None = None
    #: Keys of the checkpoint topic to tombstone right after this record (not part of the
    #: record: :class:`CheckpointWriter` sends them, see the module doc).
    supersedes: tuple[bytes, ...] = field(default=(), compare=False, repr=False)

    def fence_for(self, store: str) -> ChangelogFence | None:
        """The rule a reader of ``store``'s changelog applies to reach this checkpoint's state.

        ``None``: take every record up to the checkpointed offset.
        """
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
        if self.claim_offset is not None:
            body["claim_offset"] = self.claim_offset
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
                claim_offset=None if body.get("claim_offset") is None else int(body["claim_offset"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"unreadable checkpoint {where}: {exc}"
            raise CheckpointError(msg) from exc


def checkpoint_key(checkpoint: TaskCheckpoint) -> bytes:
    """The key of ``checkpoint``'s record in the checkpoint topic.

    Task, generation and claimant (see the module doc).

    >>> checkpoint_key(TaskCheckpoint("Partition 3", generation=2, claimant="host:7:ab"))
    b'Partition 3#2#host:7:ab'
    >>> checkpoint_key(TaskCheckpoint("Partition 3", generation=2))
    b'Partition 3#2#'
    """
    parts = (checkpoint.task_name, str(checkpoint.generation), checkpoint.claimant or "")
    return KEY_SEPARATOR.join(parts).encode()


def task_of_key(record_key: bytes) -> str:
    """The task a checkpoint record's key names (this samzapy's keys or an older one's).

    >>> task_of_key(b"Partition 3#2#host:7:ab"), task_of_key(b"Partition 3")
    ('Partition 3', 'Partition 3')
    """
    return record_key.decode().split(KEY_SEPARATOR, 1)[0]


@dataclass
class _Entry:
    """The newest record of one implied key: its offset, the key it was written with, its value."""

    offset: int
    record_key: bytes
    checkpoint: TaskCheckpoint


class CheckpointFold:
    """Folds the records of a checkpoint topic, in log order, into each task's checkpoint.

    Records are kept by the key their value implies (:func:`checkpoint_key`), the newest of
    each, as compaction keeps them; a tombstone drops the records written with its key. A
    task's checkpoint, from what is kept of task T:

    1. the highest generation G of T that has a record passing rule 2 (a lower generation's
       record is a fenced zombie's, whenever it landed);
    2. G's owner is the claimant of its first claim (the lowest claim offset, which every
       record of a claimant carries after its claim): a record of G by another claimant is
       ignored (a claim that lost the race for G). Records without a claimant (tools, older
       samzapy) neither name an owner nor are filtered by one;
    3. of those, the newest record is T's checkpoint.

    The result is the same for a log and for what compaction leaves of it
    (:func:`samzapy.kafka.compaction.compact`) when the log was written with these keys.

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
        self._entries: dict[str, dict[bytes, _Entry]] = {}  # task -> implied key -> newest
        self._seen: dict[str, int] = {}  # task -> highest generation in any record
        self._claims: dict[tuple[str, int], dict[str, int]] = {}  # (task, gen) -> claimant -> offset
        self._next = 0  # the offset given to records added without one

    def add(
        self, checkpoint: TaskCheckpoint, offset: int | None = None, record_key: bytes | None = None
    ) -> bool:
        """Fold in the next record of the log; whether it is now its task's checkpoint.

        ``offset``: its offset, default one past the last; ``record_key``: the key it was
        written with, default the implied one.
        """
        offset = self._next if offset is None else offset
        self._next = offset + 1
        name, generation, claimant = checkpoint.task_name, checkpoint.generation, checkpoint.claimant
        self._seen[name] = max(self._seen.get(name, generation), generation)
        owner = self.owner(name, generation)
        if claimant is not None:
            claimed_at = offset if checkpoint.claim_offset is None else checkpoint.claim_offset
            claims = self._claims.setdefault((name, generation), {})
            claims[claimant] = min(claims.get(claimant, claimed_at), claimed_at)
        key = checkpoint_key(checkpoint)
        self._entries.setdefault(name, {})[key] = _Entry(offset, record_key or key, checkpoint)
        current = self.checkpoints.get(name)
        if current is not None and self.owner(name, generation) == owner:
            # The common case, without recomputing (a topic read from its start has a record
            # per commit): the newest accepted record of at least the checkpoint's generation wins.
            if generation < current.generation:
                return False
            if owner is None or claimant in (None, owner):
                self.checkpoints[name] = checkpoint
                return True
            if generation == current.generation:
                return False
        self._settle(name)
        return self.checkpoints.get(name) is checkpoint

    def remove(self, record_key: bytes) -> None:
        """A tombstone: the records written with ``record_key`` are gone.

        What was learnt of generations and claims stays.
        """
        for name, entries in self._entries.items():
            gone = [key for key, entry in entries.items() if entry.record_key == record_key]
            for key in gone:
                del entries[key]
            if gone:
                self._settle(name)

    def _settle(self, name: str) -> None:
        """Recompute the checkpoint of task ``name`` (rules 1-3 of the class doc)."""
        entries = self._entries.get(name, {}).values()
        for generation in sorted({e.checkpoint.generation for e in entries}, reverse=True):
            owner = self.owner(name, generation)
            taken = [
                e
                for e in entries
                if e.checkpoint.generation == generation
                and (owner is None or e.checkpoint.claimant in (None, owner))
            ]
            if taken:
                self.checkpoints[name] = max(taken, key=lambda e: e.offset).checkpoint
                return
        self.checkpoints.pop(name, None)

    def owner(self, task_name: str, generation: int) -> str | None:
        """The claimant of the first claim of ``generation`` of the task.

        ``None``: no record of that generation had a claimant.
        """
        claims = self._claims.get((task_name, generation))
        return min(claims, key=lambda c: (claims[c], c)) if claims else None

    def claim_offset(self, task_name: str, generation: int, claimant: str) -> int | None:
        """The offset of ``claimant``'s claim of ``generation`` of the task (``None``: none seen)."""
        return self._claims.get((task_name, generation), {}).get(claimant)

    def highest_seen(self, task_name: str) -> int:
        """The highest generation of the task in any record folded in (0: none)."""
        return self._seen.get(task_name, 0)

    def superseded(self, task_name: str, generation: int, claimant: str) -> tuple[bytes, ...]:
        """The keys of the task's kept records that ``claimant`` may tombstone.

        ``claimant``, owning ``generation``, may tombstone them once its own record is durable:
        lower generations', and other claimants' of ``generation`` (claims that lost the race).
        """
        keys = {
            e.record_key
            for e in self._entries.get(task_name, {}).values()
            if e.checkpoint.generation < generation
            or (e.checkpoint.generation == generation and e.checkpoint.claimant not in (None, claimant))
        }
        return tuple(sorted(keys))

    def record_keys(self, task_name: str) -> tuple[bytes, ...]:
        """The keys of every kept record of the task (to delete the task: tombstone them all)."""
        return tuple(sorted({e.record_key for e in self._entries.get(task_name, {}).values()}))

    def add_record(self, record: Any, topic: str) -> TaskCheckpoint | None:
        """Fold in one consumed record of ``topic``.

        Returns its checkpoint when it became its task's (``None`` for a key-less record, a
        tombstone or an ignored record).
        """
        if record.key is None:
            return None
        if record.value is None:
            self.remove(record.key)
            return None
        checkpoint = TaskCheckpoint.from_bytes(record.value, f"{topic}/0@{record.offset}")
        return checkpoint if self.add(checkpoint, record.offset, record.key) else None


def read_checkpoints(bootstrap_servers: str, topic: str) -> dict[str, TaskCheckpoint]:
    """Every task's checkpoint in ``topic``.

    By :class:`CheckpointFold`'s rules; empty when the topic is empty.
    """
    return read_checkpoint_fold(bootstrap_servers, topic).checkpoints


def read_checkpoint_fold(bootstrap_servers: str, topic: str) -> CheckpointFold:
    """``topic`` read to its end into a :class:`CheckpointFold`."""
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
    return fold


class CheckpointWriter:
    """Writes task checkpoints through the container's producer.

    ``write`` does not wait: the caller flushes the producer afterwards, so that a commit
    costs one round trip for all of its tasks.
    """

    def __init__(self, producer: RecordSink, topic: str) -> None:
        self._producer = producer
        self.topic = topic

    def write(self, checkpoint: TaskCheckpoint) -> None:
        """Queue ``checkpoint`` as the newest record of its task, then the tombstones it implies.

        It is keyed by :func:`checkpoint_key`; the tombstones are of the keys it
        :attr:`~TaskCheckpoint.supersedes` (after it in the log: never one without the other
        before it).
        """
        self._producer.send(self.topic, checkpoint_key(checkpoint), checkpoint.to_bytes(), partition=0)
        for key in checkpoint.supersedes:
            self.tombstone(key)

    def tombstone(self, record_key: bytes) -> None:
        """Queue a tombstone of ``record_key``.

        Deleting a task: every one of :meth:`CheckpointFold.record_keys`.
        """
        self._producer.send(self.topic, record_key, None, partition=0)

    def flush(self) -> None:
        """Wait until everything queued through the producer is acknowledged."""
        self._producer.flush()

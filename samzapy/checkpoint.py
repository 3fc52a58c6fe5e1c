"""Checkpoints in Kafka: per task, each input partition's next offset and each store's
changelog offset, in one record so that they can never disagree.

The checkpoint topic is Samza's ``__samza_checkpoint_ver_1_for_<job>_<id>``: one partition,
compacted, keyed by task name; the newest record per key is the task's checkpoint.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from samzapy.errors import CheckpointError
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.streams import SystemStreamPartition

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 2


@dataclass
class TaskCheckpoint:
    """What a task has durably done.

    Attributes:
        task_name: ``Partition N``.
        input_offsets: per input partition, the offset of the next message to process.
        changelog_offsets: per store, the offset of the last changelog record that belongs
            to the committed state (``None``: the changelog holds no committed record).
        generation: the ownership generation that wrote it (fencing of zombie writers).
    """

    task_name: str
    input_offsets: dict[SystemStreamPartition, int] = field(default_factory=dict)
    changelog_offsets: dict[str, int | None] = field(default_factory=dict)
    generation: int = 0

    def to_bytes(self) -> bytes:
        """The record value written to the checkpoint topic (JSON)."""
        body = {
            "version": CHECKPOINT_VERSION,
            "task": self.task_name,
            "inputs": {str(ssp): offset for ssp, offset in sorted(self.input_offsets.items())},
            "changelogs": dict(sorted(self.changelog_offsets.items())),
            "generation": self.generation,
        }
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
            )
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"unreadable checkpoint {where}: {exc}"
            raise CheckpointError(msg) from exc


def read_checkpoints(bootstrap_servers: str, topic: str) -> dict[str, TaskCheckpoint]:
    """The newest checkpoint of every task in ``topic`` (empty when the topic is empty)."""
    from kafka import TopicPartition

    consumer = reader_consumer(bootstrap_servers)
    latest: dict[str, TaskCheckpoint] = {}
    try:
        for batch in read_partition(consumer, TopicPartition(topic, 0), 0):
            for record in batch:
                if record.key is None:
                    continue
                name = record.key.decode()
                if record.value is None:
                    latest.pop(name, None)
                    continue
                where = f"{topic}/0@{record.offset}"
                latest[name] = TaskCheckpoint.from_bytes(record.value, where)
    finally:
        consumer.close()
    log.debug("read %d task checkpoints from %s", len(latest), topic)
    return latest


class CheckpointWriter:
    """Writes task checkpoints through the container's producer.

    ``write`` does not wait: the caller flushes the producer afterwards, so that a commit
    costs one round trip for all of its tasks.
    """

    def __init__(self, producer: Any, topic: str) -> None:
        self._producer = producer
        self.topic = topic

    def write(self, checkpoint: TaskCheckpoint) -> None:
        """Queue ``checkpoint`` as the newest record of its task."""
        self._producer.send(self.topic, checkpoint.task_name.encode(), checkpoint.to_bytes(), partition=0)

"""Fencing zombie containers with ownership generations (MillWheel's sequencer tokens).

Every task checkpoint carries the *generation* of the ownership that wrote it. A container
that takes a task over writes, before it restores or processes anything, a checkpoint with
the same offsets and ``generation + 1`` (:meth:`Fence.claim`). Before each commit, before any
store is flushed, it reads what was appended to the checkpoint topic since it last looked
(:meth:`Fence.lost`): a checkpoint of one of its tasks with a higher generation means another
container took the task over, and the task is dropped at once, without flushing its stores
(no changelog record) and without a checkpoint.

What this guarantees: a container that was stopped (SIGSTOP, a long GC pause, a network
partition) and then resumes writes no checkpoint and no store flush after a takeover it can
see. What it does not: Kafka has no conditional write, so (1) a takeover between the check
and the commit's writes is not seen until the next commit, and (2) changelog records a task
writes *between* commits (object cache evictions; ``object.cache.size`` 0) go out before the
next check. Kafka's own answer is the transactional producer's epoch fencing, which the dev
broker does not implement fully; a real deployment that needs strict fencing sizes the
object cache so that evictions between commits are rare, or keeps ``task.commit.ms`` short.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka import TopicPartition

from samzapy.checkpoint import TaskCheckpoint
from samzapy.kafka.reading import read_partition, reader_consumer

log = logging.getLogger(__name__)


class Fence:
    """The generations this container owns, and the tail of the checkpoint topic it has read.

    Args:
        servers: bootstrap servers to read the checkpoint topic from.
        topic: the job's checkpoint topic (one partition).
        start: the offset up to which the caller has read the topic already.
    """

    def __init__(self, servers: str, topic: str, start: int = 0) -> None:
        self._consumer = reader_consumer(servers)
        self._tp = TopicPartition(topic, 0)
        self._position = start
        self.generations: dict[str, int] = {}

    def claim(self, task_names: list[str], checkpoints: dict[str, TaskCheckpoint], writer: Any) -> None:
        """Take the tasks over: queue a checkpoint with the next generation for each (the
        caller flushes the producer)."""
        for name in task_names:
            previous = checkpoints.get(name) or TaskCheckpoint(name)
            generation = previous.generation + 1
            self.generations[name] = generation
            writer.write(
                TaskCheckpoint(
                    name, dict(previous.input_offsets), dict(previous.changelog_offsets), generation
                )
            )
            log.info("%s: owned with generation %d", name, generation)

    def lost(self) -> dict[str, int]:
        """Tasks another container took over since the last call: name -> its generation."""
        taken: dict[str, int] = {}
        for batch in read_partition(self._consumer, self._tp, self._position):
            for record in batch:
                self._position = record.offset + 1
                if record.key is None or record.value is None:
                    continue
                name = record.key.decode()
                mine = self.generations.get(name)
                if mine is None:
                    continue
                checkpoint = TaskCheckpoint.from_bytes(record.value, f"{self._tp}@{record.offset}")
                if checkpoint.generation > mine:
                    taken[name] = checkpoint.generation
        for name in taken:
            del self.generations[name]
        return taken

    def close(self) -> None:
        """Close the reader."""
        self._consumer.close()

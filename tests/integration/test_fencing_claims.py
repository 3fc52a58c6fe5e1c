"""Claims of a task's ownership on the real dev broker (issue 21 item 6): a generation is
owned by one container only, and readers take the newest checkpoint of the highest one."""

from __future__ import annotations

import pytest
from support import consume_all, create_topic

from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoints
from samzapy.container.fencing import Fence
from samzapy.kafka.producer import Producer
from samzapy.streams import SystemStreamPartition

pytestmark = pytest.mark.integration

SSP = SystemStreamPartition("kafka", "in", 0)
TASK = "Partition 0"


def test_two_containers_claiming_the_same_generation_end_with_one_owner_each(broker, topic_name):
    create_topic(broker, topic_name, 1, compact=True)
    producer = Producer(broker)
    writer = CheckpointWriter(producer, topic_name)
    base = {TASK: TaskCheckpoint(TASK, {SSP: 40}, {"counts": 399}, 1)}
    writer.write(base[TASK])
    writer.flush()
    first, second = Fence(broker, topic_name), Fence(broker, topic_name)
    try:
        won = first.claim([TASK], dict(base), writer)
        # The second read the topic before the first's claim landed: it claims generation 2
        # too, loses (the first record of generation 2 is the first's), and claims 3.
        again = second.claim([TASK], dict(base), writer)

        assert won == {TASK: TaskCheckpoint(TASK, {SSP: 40}, {"counts": 399}, 2, first.claimant)}
        assert again == {TASK: TaskCheckpoint(TASK, {SSP: 40}, {"counts": 399}, 3, second.claimant)}
        assert first.generations == {TASK: 2} and second.generations == {TASK: 3}
        assert first.lost() == {TASK: 3}  # fenced at its first commit
        assert second.lost() == {}

        # the first, now a zombie, lands a commit after the takeover: it never wins
        writer.write(TaskCheckpoint(TASK, {SSP: 90}, {"counts": 900}, 2, first.claimant))
        writer.flush()
        assert read_checkpoints(broker, topic_name) == again
        claims = [TaskCheckpoint.from_bytes(r.value) for r in consume_all(broker, topic_name)]
        assert [(c.generation, c.claimant) for c in claims] == [
            (1, None),
            (2, first.claimant),
            (2, second.claimant),  # the lost claim: ignored by every reader
            (3, second.claimant),
            (2, first.claimant),
        ]
    finally:
        first.close()
        second.close()
        producer.close()


def test_a_restart_after_a_zombie_commit_claims_above_the_replacement(broker, topic_name):
    create_topic(broker, topic_name, 1, compact=True)
    producer = Producer(broker)
    writer = CheckpointWriter(producer, topic_name)
    zombie, replacement = Fence(broker, topic_name), Fence(broker, topic_name)
    try:
        zombie.claim([TASK], {}, writer)
        replacement.claim([TASK], read_checkpoints(broker, topic_name), writer)
        writer.write(replacement.checkpoint(TASK, {SSP: 10}, {"counts": 99}))
        writer.write(zombie.checkpoint(TASK, {SSP: 4}, {"counts": 30}))  # the zombie's, last
        writer.flush()

        restart = Fence(broker, topic_name)
        try:
            claimed = restart.claim([TASK], read_checkpoints(broker, topic_name), writer)
        finally:
            restart.close()
        # restores the replacement's state (and its changelog fence), with a generation nobody had
        assert claimed[TASK] == TaskCheckpoint(
            TASK, {SSP: 10}, {"counts": 99}, 3, restart.claimant, fence_generation=2, fence_offsets={}
        )
    finally:
        zombie.close()
        replacement.close()
        producer.close()

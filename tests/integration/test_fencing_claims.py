"""Claims of a task's ownership on the real dev broker (issue 21 item 6): a generation is
owned by one container only, and readers take the newest checkpoint of the highest one."""

from __future__ import annotations

import time

import pytest
from support import consume_all, create_topic, wait_for

from samzapy.checkpoint import CheckpointFold, CheckpointWriter, TaskCheckpoint, read_checkpoints
from samzapy.container.fencing import ContainerFenced, Fence, SendGate
from samzapy.kafka.compaction import compact
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


def test_what_compaction_leaves_of_the_topic_reads_the_same(broker, topic_name):
    """The zombie's commit lands last; the owner's second commit tombstones the keys of the
    lower generation: the topic compacted as Kafka would is read as the full one (issue 28)."""
    create_topic(broker, topic_name, 1, compact=True)
    producer = Producer(broker)
    writer = CheckpointWriter(producer, topic_name)
    zombie, replacement = Fence(broker, topic_name), Fence(broker, topic_name)
    try:
        zombie.claim([TASK], {}, writer)
        writer.write(zombie.checkpoint(TASK, {SSP: 2}, {"counts": 20}))
        replacement.claim([TASK], read_checkpoints(broker, topic_name), writer)
        first = replacement.checkpoint(TASK, {SSP: 10}, {"counts": 99})
        assert first.supersedes == ()  # not before a commit of the new generation is durable
        writer.write(first)
        writer.write(zombie.checkpoint(TASK, {SSP: 4}, {"counts": 30}))  # the zombie's, last
        writer.flush()
        assert replacement.lost() == {}
        second = replacement.checkpoint(TASK, {SSP: 12}, {"counts": 120})
        assert second.supersedes == (f"{TASK}#1#{zombie.claimant}".encode(),)
        writer.write(second)
        writer.flush()
    finally:
        zombie.close()
        replacement.close()
        producer.close()
    log = consume_all(broker, topic_name)
    full = read_checkpoints(broker, topic_name)
    assert full[TASK] == second
    for kept in (compact(log, drop_tombstones=False), compact(log)):
        fold = CheckpointFold()
        for record in kept:
            fold.add_record(record, topic_name)
        assert fold.checkpoints == full
    assert len(compact(log)) == 1  # one record per task once the tombstones are gone


def test_a_send_after_the_lease_checks_the_fence_and_a_fenced_container_sends_nothing(broker, topic_name):
    """Issue 28 item 3: the send gate (passthrough mode) refuses every send once a check shows
    a takeover; sends within the lease of the last check that passed still go out."""
    create_topic(broker, topic_name, 1, compact=True)
    out = f"{topic_name}-out"
    create_topic(broker, out, 1)
    producer, other = Producer(broker), Producer(broker)
    mine, theirs = Fence(broker, topic_name), Fence(broker, topic_name)
    try:
        mine.claim([TASK], {}, CheckpointWriter(producer, topic_name))
        gate = SendGate(mine, lease_s=0.5)
        producer.guard(gate)
        producer.send(out, b"k", b"before")  # the lease ran out at once: checked, still mine
        theirs.claim([TASK], read_checkpoints(broker, topic_name), CheckpointWriter(other, topic_name))
        producer.send(out, b"k", b"within the lease")  # the window that is left
        time.sleep(0.5)
        with pytest.raises(ContainerFenced) as fenced:
            producer.send(out, b"k", b"after")
        with pytest.raises(ContainerFenced):
            producer.send(out, b"k", b"and after")  # shut for good, without asking again
        producer.flush()
    finally:
        mine.close()
        theirs.close()
        producer.close()
        other.close()
    assert [r.value for r in consume_all(broker, out)] == [b"before", b"within the lease"]
    assert fenced.value.taken == {TASK: (2, theirs.claimant)}
    assert f"{TASK} by {theirs.claimant} (generation 2)" in str(fenced.value)


def test_a_commits_fencing_check_that_sees_a_takeover_shuts_the_gate(broker, topic_name):
    create_topic(broker, topic_name, 1, compact=True)
    producer = Producer(broker)
    writer = CheckpointWriter(producer, topic_name)
    mine, theirs = Fence(broker, topic_name), Fence(broker, topic_name)
    try:
        mine.claim([TASK], {}, writer)
        gate = SendGate(mine, lease_s=60)
        theirs.claim([TASK], read_checkpoints(broker, topic_name), writer)
        assert mine.lost() == {TASK: 2}
        assert gate.error is not None and gate.error.taken == {TASK: (2, theirs.claimant)}
        producer.guard(gate)
        with pytest.raises(ContainerFenced):
            producer.send(topic_name, b"k", b"v")
    finally:
        mine.close()
        theirs.close()
        producer.close()


def test_the_gates_own_reader_renews_the_lease_and_sees_a_takeover_without_a_send(broker, topic_name):
    create_topic(broker, topic_name, 1, compact=True)
    producer = Producer(broker)
    writer = CheckpointWriter(producer, topic_name)
    mine, theirs = Fence(broker, topic_name), Fence(broker, topic_name)
    gate = None
    try:
        mine.claim([TASK], {}, writer)
        gate = SendGate(mine, lease_s=0.2).start()
        wait_for(lambda: gate.open_until > time.monotonic(), timeout=10, what="the lease renewed")
        theirs.claim([TASK], read_checkpoints(broker, topic_name), writer)
        wait_for(lambda: gate.error is not None, timeout=10, what="the gate to shut")
        assert gate.error.taken == {TASK: (2, theirs.claimant)}
        assert mine.generations == {TASK: 1}  # the commit's check still loses the task
        assert mine.lost() == {TASK: 2}
    finally:
        mine.close()  # stops the gate's thread
        theirs.close()
        producer.close()
    assert gate is not None and not gate._thread.is_alive()

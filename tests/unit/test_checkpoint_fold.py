"""Which record of the checkpoint topic is a task's checkpoint (issue 21 item 6): the newest of
the highest ownership generation, the first claimant of a generation owning it."""

from __future__ import annotations

import doctest
import random
from typing import NamedTuple

import pytest

from samzapy import checkpoint as checkpoint_module
from samzapy.checkpoint import CheckpointFold, TaskCheckpoint, checkpoint_key
from samzapy.kafka.compaction import compact
from samzapy.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


def cp(
    generation: int, offset: int, claimant: str | None = None, task: str = "Partition 0"
) -> TaskCheckpoint:
    return TaskCheckpoint(task, {SSP: offset}, {"counts": offset * 10}, generation, claimant)


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None


def commit(generation: int, offset: int, claimant: str, claimed_at: int) -> TaskCheckpoint:
    """A commit's checkpoint, naming the offset of its writer's claim."""
    record = cp(generation, offset, claimant)
    record.claim_offset = claimed_at
    return record


def records(*checkpoints: TaskCheckpoint) -> list[Rec]:
    """The records a CheckpointWriter writes for ``checkpoints``, at offsets 0, 1, ..."""
    return [Rec(i, checkpoint_key(c), c.to_bytes()) for i, c in enumerate(checkpoints)]


def folded(log: list[Rec]) -> CheckpointFold:
    result = CheckpointFold()
    for record in log:
        result.add_record(record, "checkpoints")
    return result


def fold(*records: TaskCheckpoint) -> CheckpointFold:
    result = CheckpointFold()
    for record in records:
        result.add(record)
    return result


def test_a_later_record_of_a_lower_generation_never_wins() -> None:
    # the zombie's commit (generation 1) lands after the replacement's claim and commit
    found = fold(cp(1, 5, "a"), cp(2, 5, "b"), cp(2, 9, "b"), cp(1, 7, "a")).checkpoints
    assert found == {"Partition 0": cp(2, 9, "b")}


def test_the_newest_record_of_the_highest_generation_wins() -> None:
    assert fold(cp(3, 1, "c"), cp(3, 2, "c"), cp(3, 4, "c")).checkpoints["Partition 0"] == cp(3, 4, "c")


def test_a_claim_that_lost_the_race_for_a_generation_is_ignored() -> None:
    log = fold(cp(1, 5, "a"), cp(2, 5, "b"), cp(2, 5, "c"), cp(2, 8, "b"), cp(2, 6, "c"))
    assert log.checkpoints["Partition 0"] == cp(2, 8, "b")
    assert log.owner("Partition 0", 2) == "b"
    assert log.highest_seen("Partition 0") == 2


def test_records_without_claimant_are_taken_by_generation_alone() -> None:
    # written by the checkpoint tool or an older samzapy
    assert fold(cp(2, 5, "b"), cp(2, 6)).checkpoints["Partition 0"] == cp(2, 6)
    assert fold(cp(2, 6), cp(2, 7, "b")).checkpoints["Partition 0"] == cp(2, 7, "b")
    assert fold(cp(0, 1), cp(0, 2)).checkpoints["Partition 0"] == cp(0, 2)


def test_tasks_are_folded_apart() -> None:
    found = fold(cp(2, 5, "b", "Partition 0"), cp(1, 9, "a", "Partition 1"), cp(1, 6, "a", "Partition 0"))
    assert found.checkpoints == {
        "Partition 0": cp(2, 5, "b", "Partition 0"),
        "Partition 1": cp(1, 9, "a", "Partition 1"),
    }


def test_a_tombstone_removes_the_records_of_its_key_but_keeps_the_generations() -> None:
    log = fold(cp(2, 5, "b"))
    log.remove(checkpoint_key(cp(2, 5, "b")))
    assert log.checkpoints == {}
    assert log.highest_seen("Partition 0") == 2
    assert log.add(cp(3, 9, "c")) is True


def test_the_first_claim_owns_a_generation_even_when_compaction_removed_it() -> None:
    # a's claim of generation 2 (offset 1) comes first; b's claim of 2 (offset 2) lost, yet
    # lands after a's last commit; a's commits carry the offset of a's claim
    log = records(cp(1, 5, "z"), cp(2, 5, "a"), cp(2, 5, "b"), commit(2, 9, "a", claimed_at=1), cp(2, 4, "b"))
    assert [r.offset for r in compact(log)] == [0, 3, 4]
    for kept in (log, compact(log)):
        assert folded(kept).checkpoints["Partition 0"] == commit(2, 9, "a", claimed_at=1)
        assert folded(kept).owner("Partition 0", 2) == "a"


def test_a_zombie_record_landing_last_cannot_be_all_that_compaction_leaves() -> None:
    # the zombie (generation 1) lands its commit after the replacement's (generation 2) last one
    log = records(cp(1, 5, "a"), cp(1, 7, "a"), cp(2, 7, "b"), commit(2, 9, "b", claimed_at=2), cp(1, 8, "a"))
    compacted = compact(log)
    assert [r.offset for r in compacted] == [3, 4]
    assert folded(compacted).checkpoints == folded(log).checkpoints == {"Partition 0": commit(2, 9, "b", 2)}
    # keyed by task name (before issue 28), the same log read right but compacted wrong
    old = [Rec(r.offset, b"Partition 0", r.value) for r in log]
    assert folded(old).checkpoints["Partition 0"] == commit(2, 9, "b", 2)
    assert folded(compact(old)).checkpoints["Partition 0"] == cp(1, 8, "a")


def test_the_owner_tombstones_lower_generations_and_lost_claims_after_its_first_commit() -> None:
    log = folded(records(cp(1, 5, "a"), cp(2, 5, "b"), cp(2, 5, "c"), commit(2, 6, "b", claimed_at=1)))
    stale = log.superseded("Partition 0", 2, "b")
    assert stale == (checkpoint_key(cp(1, 0, "a")), checkpoint_key(cp(2, 0, "c")))
    after = records(cp(1, 5, "a"), cp(2, 5, "b"), cp(2, 5, "c"), commit(2, 6, "b", claimed_at=1))
    after += [Rec(4 + i, key, None) for i, key in enumerate(stale)]
    for kept in (after, compact(after, drop_tombstones=False), compact(after)):
        assert folded(kept).checkpoints == {"Partition 0": commit(2, 6, "b", 1)}
    assert [r.offset for r in compact(after)] == [3]


def test_a_topic_keyed_by_task_name_reads_as_before() -> None:
    log = [
        Rec(i, b"Partition 0", c.to_bytes())
        for i, c in enumerate([cp(1, 5, "a"), cp(2, 5, "b"), cp(1, 7, "a")])
    ]
    found = folded(log)
    assert found.checkpoints == {"Partition 0": cp(2, 5, "b")}
    assert found.record_keys("Partition 0") == (b"Partition 0",)
    found.add_record(Rec(3, b"Partition 0", None), "t")  # the old way to delete a task
    assert found.checkpoints == {}


def test_claimant_round_trips_and_is_absent_when_unset() -> None:
    record = cp(4, 2, "host:12:abc")
    assert TaskCheckpoint.from_bytes(record.to_bytes()) == record
    assert b"claimant" not in cp(4, 2).to_bytes()
    assert TaskCheckpoint.from_bytes(cp(4, 2).to_bytes()).claimant is None


def test_the_doctests_pass() -> None:
    result = doctest.testmod(checkpoint_module)
    assert result.failed == 0 and result.attempted > 0


class _AlwaysSettled(CheckpointFold):
    """The fold recomputing every task's checkpoint from its kept records at every record."""

    def add(
        self, checkpoint: TaskCheckpoint, offset: int | None = None, record_key: bytes | None = None
    ) -> bool:
        super().add(checkpoint, offset, record_key)
        self._settle(checkpoint.task_name)
        return self.checkpoints.get(checkpoint.task_name) is checkpoint


def _random_log(seed: int) -> list[Rec]:
    """Claims (some lost), commits naming their claim, zombies' late commits, tool records and
    tombstones of superseded keys, for two tasks, as containers write them."""
    rng = random.Random(seed)
    log: list[Rec] = []
    owners: dict[str, tuple[int, str, int]] = {}  # task -> (generation, claimant, claim offset)
    for step in range(300):
        task = f"Partition {rng.randrange(2)}"
        generation, claimant, claimed = owners.get(task, (0, "", 0))
        roll = rng.random()
        if roll < 0.1 or not claimant:  # a takeover, sometimes raced by a loser
            generation += 1
            claimant = f"c{step}"
            owners[task] = (generation, claimant, len(log))
            log.append(
                Rec(
                    len(log),
                    checkpoint_key(cp(generation, step, claimant, task)),
                    cp(generation, step, claimant, task).to_bytes(),
                )
            )
            if rng.random() < 0.3:
                loser = cp(generation, step, f"l{step}", task)
                log.append(Rec(len(log), checkpoint_key(loser), loser.to_bytes()))
        elif roll < 0.2 and generation > 1:  # a zombie's late commit
            zombie = cp(generation - 1, step, f"z{step}", task)
            log.append(Rec(len(log), checkpoint_key(zombie), zombie.to_bytes()))
        elif roll < 0.25:  # a tool's record, in the owner's generation
            tool = cp(generation, step, None, task)
            log.append(Rec(len(log), checkpoint_key(tool), tool.to_bytes()))
        else:
            record = cp(generation, step, claimant, task)
            record.claim_offset = claimed
            log.append(Rec(len(log), checkpoint_key(record), record.to_bytes()))
            if rng.random() < 0.2:  # tombstones of what this owner supersedes
                for key in folded(log).superseded(task, generation, claimant):
                    log.append(Rec(len(log), key, None))
    return log


@pytest.mark.parametrize("seed", range(20))
def test_the_fold_reads_a_random_log_as_a_full_recompute_and_as_its_compacted_form(seed: int) -> None:
    log = _random_log(seed)
    slow = _AlwaysSettled()
    for record in log:
        slow.add_record(record, "checkpoints")
    assert folded(log).checkpoints == slow.checkpoints
    assert folded(compact(log)).checkpoints == slow.checkpoints
    assert folded(compact(log, drop_tombstones=False)).checkpoints == slow.checkpoints

"""Which record of the checkpoint topic is a task's checkpoint (issue 21 item 6): the newest of
the highest ownership generation, the first claimant of a generation owning it."""

from __future__ import annotations

import doctest

from samzapy import checkpoint as checkpoint_module
from samzapy.checkpoint import CheckpointFold, TaskCheckpoint
from samzapy.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


def cp(
    generation: int, offset: int, claimant: str | None = None, task: str = "Partition 0"
) -> TaskCheckpoint:
    return TaskCheckpoint(task, {SSP: offset}, {"counts": offset * 10}, generation, claimant)


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


def test_a_tombstone_removes_the_checkpoint_but_keeps_the_generations() -> None:
    log = fold(cp(2, 5, "b"))
    log.remove("Partition 0")
    assert log.checkpoints == {}
    assert log.add(cp(1, 9, "a")) is False  # still a zombie's
    assert log.add(cp(3, 9, "c")) is True


def test_claimant_round_trips_and_is_absent_when_unset() -> None:
    record = cp(4, 2, "host:12:abc")
    assert TaskCheckpoint.from_bytes(record.to_bytes()) == record
    assert b"claimant" not in cp(4, 2).to_bytes()
    assert TaskCheckpoint.from_bytes(cp(4, 2).to_bytes()).claimant is None


def test_the_doctests_pass() -> None:
    result = doctest.testmod(checkpoint_module)
    assert result.failed == 0 and result.attempted > 0

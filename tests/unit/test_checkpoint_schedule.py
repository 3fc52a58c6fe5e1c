"""LocalCheckpointSchedule: which stores take a local checkpoint at each commit (it chooses;
commit steps 4 and 5, ``changelog_offsets`` and ``take_local_checkpoints``, take them)."""

from __future__ import annotations

from collections import Counter

from samzapy.container.checkpoint_schedule import LocalCheckpointSchedule
from samzapy.container.commit import changelog_offsets, take_local_checkpoints


class FakeStore:
    """Records the local checkpoints it was asked to take."""

    def __init__(self, offset: int | None) -> None:
        self.offset = offset
        self.taken: list[int | None] = []

    def changelog_offset(self) -> int | None:
        return self.offset

    def checkpoint(self, offset: int | None) -> None:
        self.taken.append(offset)


class FakeTask:
    def __init__(self, name: str, stores: dict[str, FakeStore]) -> None:
        self.task_name = name
        self.stores = stores


def tasks(count: int, names: tuple[str, ...]) -> list[FakeTask]:
    return [
        FakeTask(f"Partition {t}", {n: FakeStore(100 * t + i) for i, n in enumerate(names)})
        for t in range(count)
    ]


def take(
    schedule: LocalCheckpointSchedule, job_tasks: list[FakeTask], *, final: bool, now: float
) -> dict[str, dict[str, int | None]]:
    """Commit steps 4 and 5 as the commit runs them."""
    offsets = changelog_offsets(job_tasks)
    take_local_checkpoints(schedule.choose(job_tasks, final=final, now=now), offsets)
    return offsets


def taken(job_tasks: list[FakeTask]) -> set[tuple[str, str]]:
    return {(t.task_name, n) for t in job_tasks for n, s in t.stores.items() if s.taken}


def reset(job_tasks: list[FakeTask]) -> None:
    for task in job_tasks:
        for store in task.stores.values():
            store.taken.clear()


def test_interval_zero_checkpoints_every_store_at_every_commit() -> None:
    job = tasks(2, ("a", "b"))
    schedule = LocalCheckpointSchedule({"a": 0, "b": 0}, commit_ms=1000)
    for now in (0.0, 1.0, 2.0):
        offsets = take(schedule, job, final=False, now=now)
        assert taken(job) == {(t.task_name, n) for t in job for n in ("a", "b")}
        reset(job)
    assert offsets == {"Partition 0": {"a": 0, "b": 1}, "Partition 1": {"a": 100, "b": 101}}


def test_offsets_of_every_store_are_returned_even_when_none_is_checkpointed() -> None:
    job = tasks(2, ("a",))
    schedule = LocalCheckpointSchedule({"a": 10_000}, commit_ms=1000)
    offsets = take(schedule, job, final=False, now=0.0)
    assert offsets == {"Partition 0": {"a": 0}, "Partition 1": {"a": 100}}
    assert taken(job) == set()  # first deadlines are spread over the first interval


def test_checkpoints_are_spread_over_commits_and_each_store_gets_one_per_interval() -> None:
    job = tasks(4, ("a", "b", "c", "d"))  # 16 stores, as the ad-click join
    schedule = LocalCheckpointSchedule(dict.fromkeys("abcd", 10_000), commit_ms=1000)
    per_commit, per_store = [], Counter()
    for second in range(1, 41):
        take(schedule, job, final=False, now=float(second))
        now_taken = taken(job)
        per_commit.append(len(now_taken))
        per_store.update(now_taken)
        reset(job)
    assert schedule.budget == 2  # 1.6 due per commit, with slack
    assert max(per_commit) <= 2
    # 40 s at one checkpoint per 10 s: 3-4 each (the first comes within the first interval)
    assert set(per_store.values()) <= {3, 4} and len(per_store) == 16


def test_most_overdue_stores_go_first_when_more_are_due_than_the_budget() -> None:
    job = tasks(1, ("a", "b", "c"))
    schedule = LocalCheckpointSchedule(dict.fromkeys("abc", 10_000), commit_ms=1000)
    take(schedule, job, final=False, now=0.0)  # deadlines at 2.5, 5.0, 7.5 s
    assert schedule.budget == 1
    take(schedule, job, final=False, now=8.0)  # all three due: the oldest deadline first
    assert taken(job) == {("Partition 0", "a")}
    reset(job)
    take(schedule, job, final=False, now=9.0)
    assert taken(job) == {("Partition 0", "b")}


def test_final_commit_checkpoints_every_store() -> None:
    job = tasks(2, ("a", "b"))
    schedule = LocalCheckpointSchedule({"a": 60_000, "b": 0}, commit_ms=1000)
    take(schedule, job, final=False, now=0.0)
    reset(job)
    take(schedule, job, final=True, now=0.5)
    assert taken(job) == {(t.task_name, n) for t in job for n in ("a", "b")}
    assert job[0].stores["a"].taken == [0]


def test_stores_of_a_dropped_task_are_forgotten_without_error() -> None:
    job = tasks(2, ("a",))
    schedule = LocalCheckpointSchedule({"a": 2_000}, commit_ms=1000)
    take(schedule, job, final=False, now=0.0)
    remaining = job[1:]  # Partition 0 was fenced
    take(schedule, remaining, final=False, now=5.0)
    assert taken(job) == {("Partition 1", "a")}

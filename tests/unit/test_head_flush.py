"""HeadFlusher: stores flushed after polls that found the input caught up."""

from __future__ import annotations

from samzapy.container.head_flush import HeadFlusher


class FakeStore:
    def __init__(self) -> None:
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


class FakeTask:
    def __init__(self, name: str, stores: dict[str, FakeStore]) -> None:
        self.task_name = name
        self.stores = stores


def test_only_the_named_stores_are_flushed_after_a_poll_that_was_not_full() -> None:
    tasks = [FakeTask(f"Partition {p}", {"a": FakeStore(), "b": FakeStore()}) for p in range(2)]
    flusher = HeadFlusher.for_tasks(tasks, {"a"})
    assert flusher is not None
    assert flusher.after_poll(polled=10, max_records=5000, now=1.0)
    assert [t.stores["a"].flushes for t in tasks] == [1, 1]
    assert [t.stores["b"].flushes for t in tasks] == [0, 0]


def test_a_full_poll_means_behind_and_flushes_nothing() -> None:
    tasks = [FakeTask("Partition 0", {"a": FakeStore()})]
    flusher = HeadFlusher.for_tasks(tasks, {"a"})
    assert flusher is not None
    assert not flusher.after_poll(polled=5000, max_records=5000, now=1.0)
    assert tasks[0].stores["a"].flushes == 0


def test_no_flusher_without_stores_flushed_at_the_head() -> None:
    assert HeadFlusher.for_tasks([FakeTask("Partition 0", {"a": FakeStore()})], set()) is None


def test_stores_of_fenced_tasks_are_no_longer_flushed() -> None:
    tasks = [FakeTask(f"Partition {p}", {"a": FakeStore()}) for p in range(2)]
    flusher = HeadFlusher.for_tasks(tasks, {"a"})
    assert flusher is not None
    flusher.drop(tasks[1:])
    flusher.after_poll(polled=1, max_records=5000, now=1.0)
    assert [t.stores["a"].flushes for t in tasks] == [0, 1]


def test_flushes_at_the_head_are_at_least_the_minimum_interval_apart() -> None:
    tasks = [FakeTask("Partition 0", {"a": FakeStore()})]
    flusher = HeadFlusher([tasks[0].stores["a"]], min_interval_s=0.05)
    done = [flusher.after_poll(1, 5000, now=t) for t in (10.0, 10.02, 10.049, 10.05, 10.2)]
    assert done == [True, False, False, True, True]
    assert tasks[0].stores["a"].flushes == 3

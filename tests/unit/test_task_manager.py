"""The task manager (``samzapy/container/task_manager.py``): one owner of every task's state
machine. Real task builder, in-memory stores and ``TaskInstance`` objects; the commit and the
fence are recorded, since the manager only decides when they run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from samzapy import ClosableTask, StreamTask
from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import Config, parse_job_config
from samzapy.container.collector import OutputStreams
from samzapy.container.error_policy import ErrorPolicy
from samzapy.container.task_builder import TaskBuilder
from samzapy.container.task_instance import TaskInstance
from samzapy.container.task_manager import TaskManager
from samzapy.container.task_states import IllegalTransition, ManagedTask, TaskState, Transition
from samzapy.coordinator.assignor import TaskAssignment
from samzapy.metrics import MetricsRegistry
from samzapy.query.routing import GroupPlacement
from samzapy.streams import task_name_for

S = TaskState
PROPS = {
    "job.name": "j",
    "task.class": "samzapy:StreamTask",
    "task.inputs": "kafka.in",
    "stores.counts.factory": "inmemory",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "string",
}


class Closing(StreamTask, ClosableTask):
    closed: list[int] = []

    def __init__(self) -> None:
        self.partition = -1

    def init(self, context: Any) -> None:
        self.partition = context.partition

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        """Nothing to do: the manager never calls it."""

    def close(self) -> None:
        Closing.closed.append(self.partition)


class NullProducer:
    def send(self, *args: Any, **kwargs: Any) -> None:
        """Outputs are not sent here."""


class Factory:
    """The container's factory, over a real task builder with in-memory stores."""

    def __init__(self, tmp_path: Path, log: list[str]) -> None:
        self.job = parse_job_config(Config.from_dict(PROPS))
        self.builder = TaskBuilder(self.job, base_dir=tmp_path, registry=MetricsRegistry())
        self.log = log
        self.fail: set[int] = set()

    def restore(self, partition: int, checkpoint: TaskCheckpoint | None) -> dict[str, Any]:
        if partition in self.fail:
            raise OSError(f"disk of {partition} is gone")
        self.log.append(f"restore {partition}")
        return self.builder.stores(partition, checkpoint)

    def instance(self, partition: int, stores: dict[str, Any]) -> TaskInstance:
        outputs = OutputStreams(self.builder.serdes, lambda stream: 1)
        policy = ErrorPolicy(self.job, NullProducer())
        return self.builder.instance(partition, Closing(), stores, NullProducer(), outputs, [], policy)


class Recorder:
    """A listener: every move it is told, as ``"<partition> <before> -> <after>"``."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.batches = 0

    def tasks_changed(self, changes: Sequence[Transition]) -> None:
        self.batches += 1
        self.log.extend(f"{c.task.partition} {c.before.value} -> {c.after.value}" for c in changes)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[TaskManager, list[str], dict[str, int]]:
    log: list[str] = []
    fenced: dict[str, int] = {}

    def commit(tasks: list[TaskInstance], final: bool) -> None:
        log.append(f"commit {[t.partition for t in tasks]} final={final}")

    def lost() -> dict[str, int]:
        taken = dict(fenced)
        fenced.clear()
        return taken

    manager = TaskManager(Factory(tmp_path, log), commit, lost)
    manager.subscribe(Recorder(log))
    Closing.closed.clear()
    return manager, log, fenced


def test_a_task_moves_only_along_its_state_machine() -> None:
    task = ManagedTask(3)
    task.move(S.RESTORING)
    task.move(S.RUNNING)

    with pytest.raises(IllegalTransition, match="Partition 3: cannot go from running to restoring; "):
        task.move(S.RESTORING)
    with pytest.raises(IllegalTransition, match="from running it may go to suspended"):
        task.move(S.CLOSED)
    task.move(S.SUSPENDED)
    task.move(S.CLOSED)
    with pytest.raises(IllegalTransition, match="from closed it may go to nothing"):
        task.move(S.CREATED)
    standby = ManagedTask(1)
    standby.move(S.STANDBY)
    with pytest.raises(IllegalTransition):
        standby.move(S.RUNNING)  # a standby is promoted through a restore
    warming = ManagedTask(2)
    warming.move(S.WARMING_UP)
    assert warming.move(S.RESTORING) == Transition(warming, S.WARMING_UP, S.RESTORING)


def test_assign_restores_then_start_runs_and_listeners_are_told_each_move(setup) -> None:
    manager, log, _ = setup

    manager.assign({0: None, 2: None})
    assert manager.restoring() == [0, 2] and manager.running() == ()
    started = manager.start_restored()

    assert [t.partition for t in started] == [0, 2]
    assert manager.running() == tuple(started)
    assert log == [
        "0 created -> restoring",
        "2 created -> restoring",
        "restore 0",
        "restore 2",
        "0 restoring -> running",
        "2 restoring -> running",
    ]
    assert manager.owns(started[0]) and manager.state_of(2) is S.RUNNING
    with pytest.raises(
        IllegalTransition, match="Partition 0: cannot be assigned: it is running here already"
    ):
        manager.assign({0: None})


def test_revoke_commits_then_closes_and_lose_closes_without_a_commit(setup) -> None:
    manager, log, _ = setup
    manager.assign({0: None, 1: None, 2: None})
    zero, one, _ = manager.start_restored()
    log.clear()

    manager.revoke([0])
    manager.lose([1])

    assert log == [
        "commit [0] final=True",
        "0 running -> suspended",
        "0 suspended -> closed",
        "1 running -> suspended",
        "1 suspended -> closed",
    ]
    assert Closing.closed == [0]  # a lost task's close() is not called: it could write
    assert one.coordinator.shutdown_requested and not zero.coordinator.shutdown_requested
    assert [t.partition for t in manager.running()] == [2]
    assert manager.state_of(0) is None and not manager.owns(zero)


def test_a_commit_first_loses_the_tasks_the_fence_says_were_taken_over(setup) -> None:
    manager, log, fenced = setup
    manager.assign({0: None, 1: None})
    manager.start_restored()
    log.clear()
    fenced[task_name_for(1)] = 7

    manager.commit()

    assert log == ["1 running -> suspended", "1 suspended -> closed", "commit [0] final=False"]
    assert Closing.closed == []


def test_a_background_restore_runs_on_its_thread_and_its_failure_reaches_the_caller(tmp_path) -> None:
    log: list[str] = []
    factory = Factory(tmp_path, log)
    factory.fail = {1}
    manager = TaskManager(factory, lambda tasks, final: None, background=True)
    manager.assign({0: None, 1: None})

    with pytest.raises(OSError, match="disk of 1 is gone"):
        while not manager.running():
            manager.start_restored()
    assert [t.partition for t in manager.running()] == [0]


def test_standbys_and_warm_ups_are_promoted_by_assign_and_closed_when_no_longer_named(setup) -> None:
    manager, log, _ = setup

    manager.stand_by([1, 2])
    manager.warm_up([3])
    manager.assign({1: None, 3: None})
    manager.stand_by([4])

    assert log == [
        "1 created -> standby",
        "2 created -> standby",
        "3 created -> warming up",
        "1 standby -> restoring",
        "3 warming up -> restoring",
        "restore 1",
        "restore 3",
        "2 standby -> closed",
        "4 created -> standby",
    ]
    assert manager.standbys() == [4] and manager.warming_up() == [] and manager.restoring() == [1, 3]


def test_close_closes_running_restoring_and_standby_tasks_and_says_it_is_closing(setup) -> None:
    manager, log, _ = setup
    manager.assign({0: None})
    manager.start_restored()
    manager.assign({1: None})
    manager.stand_by([2])
    log.clear()

    manager.close()

    assert manager.closing
    assert log == [
        "0 running -> suspended",
        "0 suspended -> closed",
        "1 restoring -> closed",
        "2 standby -> closed",
    ]
    assert Closing.closed == [0] and manager.running() == () and manager.standbys() == []


def test_the_group_query_placement_follows_the_managers_tasks_and_routes_by_the_assignment(setup) -> None:
    manager, _, _ = setup
    assignment = TaskAssignment(3, actives=(0, 1), endpoints={0: "http://me", 1: "http://me", 2: "http://b"})
    placement = GroupPlacement(lambda: assignment, "http://me")
    manager.subscribe(placement)

    manager.assign({0: None, 1: None})
    restoring = placement.mine()
    manager.start_restored()
    manager.revoke([1])
    manager.stand_by([3])

    assert restoring == [0, 1] and placement.mine() == [0]
    assert placement.owner(2) == "http://b" and placement.owner(0) is None
    assert placement.others() == ["http://b"]

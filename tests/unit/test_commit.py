"""The commit (``samzapy/container/commit.py``) runs its numbered steps in order, and the
container's commit loses fenced tasks (through its task manager) before it commits the others
(fencing is an input, not a step)."""

from __future__ import annotations

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import Config, parse_job_config
from samzapy.container.checkpoint_schedule import LocalCheckpointSchedule
from samzapy.container.commit import Commit
from samzapy.container.run_loop import Container
from samzapy.container.task_followers import InputsFollower
from samzapy.container.task_instance import Coordinator
from samzapy.container.task_manager import TaskManager
from samzapy.metrics import MetricsGroup
from samzapy.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


class Log(list):
    """The calls, in order, as (step, detail)."""


class FakeStore:
    def __init__(self, log: Log, name: str, offset: int) -> None:
        self.log, self.name, self.offset = log, name, offset

    def changelog_offset(self) -> int:
        self.log.append(("changelog-offset", self.name))
        return self.offset

    def checkpoint(self, offset: int | None) -> None:
        self.log.append(("local-checkpoint", f"{self.name}@{offset}"))


class FakeTask:
    def __init__(self, log: Log, name: str, offset: int) -> None:
        self.log = log
        self.task_name = name
        self.partition = int(name.split()[-1])
        self.stores = {"s": FakeStore(log, f"{name}/s", offset)}
        self.offsets = {SSP: offset}
        self.coordinator = Coordinator()

    def flush_stores(self) -> None:
        self.log.append(("flush-stores", self.task_name))

    def abandon(self) -> None:
        self.log.append(("abandon", self.task_name))


class FakeProducer:
    def __init__(self, log: Log) -> None:
        self.log = log

    def flush(self) -> None:
        self.log.append(("producer-flush", ""))


class FakeWriter:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.written: list[TaskCheckpoint] = []

    def write(self, checkpoint: TaskCheckpoint) -> None:
        self.log.append(("write-checkpoint", checkpoint.task_name))
        self.written.append(checkpoint)


def make(log: Log) -> tuple[Commit, FakeWriter]:
    writer = FakeWriter(log)
    commit = Commit(
        FakeProducer(log),
        writer,
        LocalCheckpointSchedule({"s": 0}, 1000),
        lambda name, inputs, changelogs: TaskCheckpoint(name, inputs, changelogs, 7),
        MetricsGroup("container"),
        drain=lambda: log.append(("drain", "")),
    )
    return commit, writer


def test_the_steps_run_in_the_documented_order() -> None:
    log = Log()
    commit, writer = make(log)
    tasks = [FakeTask(log, "Partition 0", 10), FakeTask(log, "Partition 1", 20)]

    commit(tasks)

    assert log == [
        ("drain", ""),
        ("flush-stores", "Partition 0"),
        ("flush-stores", "Partition 1"),
        ("producer-flush", ""),
        ("changelog-offset", "Partition 0/s"),
        ("changelog-offset", "Partition 1/s"),
        ("local-checkpoint", "Partition 0/s@10"),
        ("local-checkpoint", "Partition 1/s@20"),
        ("write-checkpoint", "Partition 0"),
        ("write-checkpoint", "Partition 1"),
        ("producer-flush", ""),
    ]
    assert writer.written == [
        TaskCheckpoint("Partition 0", {SSP: 10}, {"s": 10}, 7),
        TaskCheckpoint("Partition 1", {SSP: 20}, {"s": 20}, 7),
    ]
    assert commit.calls.value == 1 and commit.last_written["Partition 1"] == writer.written[1]


def test_an_unchanged_checkpoint_is_not_written_again() -> None:
    log = Log()
    commit, writer = make(log)
    tasks = [FakeTask(log, "Partition 0", 10), FakeTask(log, "Partition 1", 20)]
    commit(tasks)
    tasks[1].offsets[SSP] = 21
    tasks[0].coordinator.commit_requested = True

    commit(tasks)

    assert [c.task_name for c in writer.written] == ["Partition 0", "Partition 1", "Partition 1"]
    assert not tasks[0].coordinator.commit_requested


class FakeFence:
    def __init__(self, lost: dict[str, int]) -> None:
        self._lost = lost

    def lost(self) -> dict[str, int]:
        lost, self._lost = self._lost, {}
        return lost


class FakeInputs:
    def __init__(self) -> None:
        self.kept: list = []

    def drop_tasks(self, kept: list, positions: dict) -> None:
        self.kept = list(kept)


class GivenTasks:
    """A task factory that hands out the given tasks (their stores are theirs)."""

    def __init__(self, tasks: dict[int, FakeTask]) -> None:
        self.tasks = tasks

    def restore(self, partition: int, checkpoint: TaskCheckpoint | None) -> dict:
        return {}

    def instance(self, partition: int, stores: dict) -> FakeTask:
        return self.tasks[partition]


def test_the_loop_drops_fenced_tasks_before_it_commits_the_others() -> None:
    config = Config.from_dict(
        {"job.name": "j", "task.class": "samzapy:StreamTask", "task.inputs": "kafka.in"}
    )
    container = Container(parse_job_config(config))
    log = Log()
    kept, lost = FakeTask(log, "Partition 0", 1), FakeTask(log, "Partition 1", 2)
    committed: list[list] = []
    manager = container.task_manager = TaskManager(
        GivenTasks({0: kept, 1: lost}),
        lambda tasks, final: committed.append(list(tasks)),
        FakeFence({"Partition 1": 3}).lost,
    )
    manager.assign({0: None, 1: None})
    manager.start_restored()
    inputs = FakeInputs()
    manager.subscribe(InputsFollower(manager, inputs, container.job, {}))  # type: ignore[arg-type]

    container._commit()

    assert committed == [[kept]]  # the commit never sees the lost task
    assert container.tasks == [kept] and inputs.kept == [kept]
    assert lost.coordinator.shutdown_requested and ("flush-stores", "Partition 1") not in log
    assert ("abandon", "Partition 1") in log

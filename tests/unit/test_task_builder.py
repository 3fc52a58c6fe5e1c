"""The task builder (``samzapy/container/task_builder.py``): one way to build a task's stores,
context and instance, shared by the container, the Spark replay and ``TaskHarness``."""

from __future__ import annotations

from pathlib import Path

from samzapy import StreamTask
from samzapy.config import Config, parse_job_config
from samzapy.container.collector import OutputStreams
from samzapy.container.error_policy import ErrorPolicy
from samzapy.container.task_builder import TaskBuilder, ensure_output_topic
from samzapy.metrics import MetricsRegistry
from samzapy.streams import SystemStream, SystemStreamPartition
from samzapy.testing import CollectingChangelog, TaskHarness

PROPS = {
    "job.name": "j",
    "task.class": "samzapy:StreamTask",
    "task.inputs": "kafka.in",
    "stores.counts.factory": "rocksdb",
    "stores.counts.changelog": "kafka.counts-changelog",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "string",
    "stores.table.factory": "inmemory",
    "stores.table.side.inputs": "kafka.profiles",
}


class Remembering(StreamTask):
    def init(self, context):  # type: ignore[no-untyped-def]
        self.context = context
        self.counts = context.get_store("counts")

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        self.counts.put(envelope.key, envelope.message)


class FakeAdmin:
    def __init__(self, existing: dict[str, int]) -> None:
        self.existing = existing
        self.created: list[tuple[str, int]] = []

    def partition_count(self, topic: str) -> int | None:
        return self.existing.get(topic)

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> int:
        self.created.append((topic, partitions))
        return partitions


def chain(store: object) -> list[str]:
    names = []
    while store is not None:
        names.append(type(store).__name__)
        store = getattr(store, "inner", None)
    return names


def job(**extra: str):  # type: ignore[no-untyped-def]
    config = Config.from_dict({**PROPS, **extra})
    return config, parse_job_config(config)


def test_output_partitions_come_from_the_topic_then_the_config_then_the_task_count() -> None:
    _, plain = job()
    _, configured = job(**{"systems.kafka.streams.out.partitions": "3"})
    _, defaulted = job(**{"systems.kafka.default.stream.partitions": "5"})
    out = SystemStream("kafka", "out")

    assert ensure_output_topic(FakeAdmin({"out": 8}), plain, out, 4) == 8
    admin = FakeAdmin({})
    assert ensure_output_topic(admin, configured, out, 4) == 3
    assert ensure_output_topic(admin, defaulted, out, 4) == 5
    assert ensure_output_topic(admin, plain, out, 4) == 4
    assert admin.created == [("out", 3), ("out", 5), ("out", 4)]
    files_only = FakeAdmin({})
    assert ensure_output_topic(files_only, configured, out, 4, create=False) == 3
    assert files_only.created == []


def test_stores_get_the_callers_changelog_and_side_input_stores_come_from_side_inputs(tmp_path: Path) -> None:
    config, parsed = job()
    asked: list[tuple[str, int]] = []

    def changelog_for(store_config, partition):  # type: ignore[no-untyped-def]
        asked.append((store_config.name, partition))
        return CollectingChangelog()

    class SideInputs:
        def store(self, name: str, partition: int) -> str:
            return f"side-input store {name}/{partition}"

    builder = TaskBuilder(
        parsed,
        base_dir=tmp_path,
        registry=MetricsRegistry(),
        changelog_for=changelog_for,
        side_inputs=SideInputs(),
    )
    stores = builder.stores(2, restore=True)  # no checkpoint: restored to empty

    assert asked == [("counts", 2)]
    assert stores["table"] == "side-input store table/2"
    assert (tmp_path / "counts" / "Partition_2").is_dir()
    assert "store.counts.Partition 2" in builder.registry.snapshot()
    stores["counts"].close()


def test_the_instance_is_initialised_with_a_context_over_its_stores(tmp_path: Path) -> None:
    config, parsed = job()
    builder = TaskBuilder(parsed, base_dir=tmp_path, registry=MetricsRegistry())
    stores = builder.stores(1)
    task = Remembering()
    ssp = SystemStreamPartition("kafka", "in", 1)

    instance = builder.instance(
        1,
        task,
        stores,
        object(),
        OutputStreams(builder.serdes, lambda s: 1),
        [ssp],
        ErrorPolicy(parsed, None),
    )

    assert (task.context.task_name, task.context.partition) == ("Partition 1", 1)
    assert task.counts is stores["counts"] and task.context.metrics is instance.metrics
    assert list(instance.input_serdes) == [ssp] and instance.task_name == "Partition 1"
    instance.close()


def test_the_harness_builds_the_same_store_stack_as_the_container(tmp_path: Path) -> None:
    config, parsed = job()
    built = TaskBuilder(
        parsed,
        base_dir=tmp_path / "container",
        registry=MetricsRegistry(),
        changelog_for=lambda store_config, partition: CollectingChangelog(),
    ).stores(0)
    harness = TaskHarness(Remembering, dict(PROPS), base_dir=tmp_path / "harness")
    try:
        assert chain(harness.stores["counts"]) == chain(built["counts"])
        assert harness.task.counts is harness.stores["counts"]
        assert set(harness.changelogs) == {"counts"}
    finally:
        harness.close()
        built["counts"].close()

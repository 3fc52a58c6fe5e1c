"""Rules across keys, user code and the application view: all in parse_job_config, before any
connection, every problem with its file:line in one ConfigError."""

from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from samzapy.config import AppConfig, ConfigError, ReporterSpec, load_config, parse_job_config
from samzapy.context import StoreContext
from samzapy.metrics import MetricsGroup
from samzapy.streams import SystemStream
from samzapy.task import StreamTask
from samzapy.testing import TaskHarness

BASE = "job.name=counter\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.pageviews\n"
PROCESSOR = "samzapy.jobs.pageview_enrich_global:ZipFromProfile"


@pytest.fixture
def write(tmp_path: Path):
    def write(text: str) -> Path:
        file = tmp_path / "job.properties"
        file.write_text(text)
        return file

    return write


def problems(file: Path, *, check_task_class: bool = False) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_job_config(load_config(file), check_task_class=check_task_class)
    return info.value.problems


# -- the object cache holds a write batch -------------------------------------------------


def test_a_cache_smaller_than_the_write_batch_names_both_keys_values_and_lines(write) -> None:
    file = write(
        BASE + "stores.s.factory=rocksdb\nstores.s.object.cache.size=10\nstores.s.write.batch.size=500\n"
    )
    [problem] = problems(file)
    assert problem.startswith(
        f"Store 's': 'stores.s.object.cache.size' (10, {file}:5) is smaller than "
        f"'stores.s.write.batch.size' (500, {file}:6): "
    )
    assert "raise stores.s.object.cache.size to at least 500" in problem


def test_a_cache_smaller_than_the_default_batch_says_the_batch_is_the_default(write) -> None:
    file = write(BASE + "stores.s.factory=rocksdb\nstores.s.object.cache.size=10\n")
    [problem] = problems(file)
    assert "'stores.s.write.batch.size' (500, the default)" in problem
    assert f"(10, {file}:5)" in problem


@pytest.mark.parametrize(
    "lines",
    [
        "stores.s.object.cache.size=0\nstores.s.write.batch.size=5000\n",  # no cache: no rule
        "stores.s.object.cache.size=500\nstores.s.write.batch.size=500\n",
        "stores.s.write.batch.size=1000\n",  # the default cache (1000) holds it
    ],
)
def test_a_cache_that_holds_the_batch_or_no_cache_passes(write, lines: str) -> None:
    parse_job_config(load_config(write(BASE + "stores.s.factory=rocksdb\n" + lines)))


def test_an_invalid_size_is_reported_once_not_again_by_the_rule(write) -> None:
    file = write(BASE + "stores.s.factory=rocksdb\nstores.s.object.cache.size=ten\n")
    [problem] = problems(file)
    assert problem.startswith(f"Invalid value 'ten' for 'stores.s.object.cache.size' ({file}:5)")


# -- metrics reporters -------------------------------------------------------------------


def test_reporters_are_resolved_onto_the_job_config(write) -> None:
    job = parse_job_config(
        load_config(
            write(
                BASE + "metrics.reporters=snapshot,prom\nmetrics.reporter.snapshot.stream=kafka.metrics\n"
                "metrics.reporter.snapshot.interval=5\nmetrics.reporter.prom.class=prometheus\n"
                "metrics.reporter.prom.port=9999\n"
            )
        )
    )
    assert job.reporters == (
        ReporterSpec("snapshot", "snapshot", SystemStream("kafka", "metrics"), interval_s=5),
        ReporterSpec("prom", "prometheus", port=9999),
    )


def test_interval_seconds_wins_over_samzas_interval_in_any_order(write) -> None:
    file = write(
        BASE + "metrics.reporters=log\n"
        "metrics.reporter.log.interval.seconds=7\n"
        "metrics.reporter.log.interval=9\n"
    )
    assert parse_job_config(load_config(file)).reporters == (ReporterSpec("log", "log", interval_s=7),)


def test_reporter_store_and_key_problems_come_in_one_error_in_file_order(write) -> None:
    file = write(
        BASE + "stores.s.factory=rocksdb\n"
        "stores.s.object.cache.size=10\n"  # line 5
        "metrics.reporters=prometheus,snapshot\n"  # line 6
        "metrics.reporter.prometheus.prot=9000\n"  # line 7
        "task.comit.ms=5\n"  # line 8
    )
    found = problems(file)
    assert len(found) == 4
    assert found[0].startswith("Store 's': ") and f"(10, {file}:5)" in found[0]
    assert found[1].startswith("'metrics.reporter.snapshot.stream' is required for the snapshot reporter")
    assert found[2] == (
        f"Unknown key 'metrics.reporter.prometheus.prot' ({file}:7): "
        "did you mean 'metrics.reporter.prometheus.port'?"
    )
    assert found[3].startswith(f"Unknown key 'task.comit.ms' ({file}:8)")


# -- user code: task.class and side-input processors, imported once by the parse -----------


def test_check_task_class_keeps_the_imported_class_on_the_job(write) -> None:
    job = parse_job_config(load_config(write(BASE)), check_task_class=True)
    assert job.task_type is StreamTask


def test_task_type_of_a_job_parsed_without_importing_says_how(write) -> None:
    job = parse_job_config(load_config(write(BASE)))
    with pytest.raises(ConfigError, match=r"check_task_class=True"):
        job.task_type  # noqa: B018 - the property raises


def side_input_store(processor: str) -> str:
    return (
        "stores.zips.factory=inmemory\nstores.zips.side.inputs=kafka.profiles\n"
        f"stores.zips.side.inputs.processor.factory={processor}\n"
    )


def test_a_side_input_processor_is_imported_by_the_parse(write) -> None:
    file = write(BASE + side_input_store(PROCESSOR))
    store = parse_job_config(load_config(file), check_task_class=True).stores["zips"]
    assert store.processor is not None
    assert list(store.processor(SimpleNamespace(key="u1", message={"zip": "9"}), None)) == [("u1", "9")]
    unchecked = parse_job_config(load_config(file)).stores["zips"]
    with pytest.raises(ConfigError, match="stores.zips.side.inputs.processor.factory"):
        unchecked.processor  # noqa: B018 - the property raises


def test_user_code_problems_are_listed_with_the_others(write) -> None:
    file = write(
        BASE.replace("samzapy.task:StreamTask", "samzapy.task:Nope")
        + side_input_store("no_such_module_xyz:f")  # lines 4-6
        + "task.commit.ms=x\n"  # line 7
    )
    found = problems(file, check_task_class=True)
    assert len(found) == 3
    assert found[0].startswith(f"'task.class' = 'samzapy.task:Nope' ({file}:2)")
    assert found[1].startswith(
        f"'stores.zips.side.inputs.processor.factory' = 'no_such_module_xyz:f' ({file}:6): "
        "module 'no_such_module_xyz' not found"
    )
    assert found[2].startswith(f"Invalid value 'x' for 'task.commit.ms' ({file}:7)")


# -- what a task sees: the application keys ------------------------------------------------


def test_tasks_see_only_the_application_keys_with_their_places(write) -> None:
    file = write(BASE + "app.threshold=12\napp.mode=fast\n")
    job = parse_job_config(load_config(file))
    context = StoreContext("Partition 0", 0, job, {}, MetricsGroup("t"))
    assert isinstance(context.config, AppConfig)
    assert dict(context.config) == {"app.threshold": "12", "app.mode": "fast"}
    assert "task.inputs" not in context.config and context.inputs == (SystemStream("kafka", "pageviews"),)
    assert context.config.location("app.mode") == f"{file}:5"
    assert context.config.get_int("app.threshold", 0) == 12
    with pytest.raises(ConfigError) as info:
        context.config.get_int("app.mode")
    assert info.value.problems == [f"Invalid value 'fast' for 'app.mode' ({file}:5): must be an integer"]
    with pytest.raises(TypeError):
        context.config["app.mode"] = "slow"  # type: ignore[index]


def test_the_context_gives_the_validated_stream_settings(write) -> None:
    job = parse_job_config(load_config(write(BASE + "systems.kafka.streams.out.partitions=4\n")))
    context = StoreContext("Partition 0", 0, job, {}, MetricsGroup("t"))
    assert context.stream(SystemStream("kafka", "out")).partitions == 4
    assert context.stream(SystemStream("kafka", "other")).partitions is None


def test_the_application_view_survives_pickling(write) -> None:
    file = write(BASE + "app.threshold=12\n")
    view = parse_job_config(load_config(file)).app_config
    copy = pickle.loads(pickle.dumps(view))
    assert copy == view and copy.location("app.threshold") == f"{file}:4"


class _ReadsConfig(StreamTask):
    def init(self, context) -> None:  # noqa: ANN001 - the TaskContext protocol
        self.seen = (context.config.get_int("app.n", 0), context.inputs)

    def process(self, envelope, collector, coordinator) -> None:  # noqa: ANN001
        pass


def test_the_harness_hands_the_view_to_init() -> None:
    harness = TaskHarness(_ReadsConfig, {"app.n": "3", "task.inputs": "kafka.a,kafka.b"})
    try:
        assert harness.task.seen == (3, (SystemStream("kafka", "a"), SystemStream("kafka", "b")))
    finally:
        harness.close()

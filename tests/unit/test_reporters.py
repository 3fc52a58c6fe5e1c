"""Metrics reporters without a broker: config, Prometheus text, /health, snapshot shape, gauges."""

from __future__ import annotations

import doctest
import importlib
import json
import logging
import re
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from kafka import TopicPartition
from prometheus_client import CollectorRegistry, generate_latest
from promtool_support import promtool_problems

from samzapy.config import Config, parse_job_config
from samzapy.errors import ConfigError, SamzapyError
from samzapy.health import ContainerStatus
from samzapy.metrics import MetricsRegistry
from samzapy.reporters import (
    LogReporter,
    MetricsHttpServer,
    RegistryCollector,
    Reporters,
    ReporterSpec,
    ReportSource,
    SnapshotReporter,
    register_container_gauges,
)
from samzapy.reporters.catalog import CATALOG, HISTOGRAMS
from samzapy.reporters.prometheus import metric_name
from samzapy.streams import SystemStream, SystemStreamPartition

REPO = Path(__file__).resolve().parents[2]

BASE = {
    "job.name": "j",
    "task.class": "mod:Task",
    "task.inputs": "kafka.in",
}
SOURCE = ReportSource("j", "1", "samzapy-container-0", host="h")


def specs(**keys: str) -> list[ReporterSpec]:
    return list(parse_job_config(Config.from_dict({**BASE, **keys})).reporters)


@pytest.mark.parametrize(
    "module",
    [
        "samzapy.health",
        "samzapy.metrics",
        "samzapy.kafka.fast_path_state",
        "samzapy.reporters.periodic",
        "samzapy.reporters.prometheus",
    ],
)
def test_the_doctests_pass(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


# -- configuration ----------------------------------------------------------------------------


def test_samza_class_names_and_short_names_are_accepted() -> None:
    found = specs(
        **{
            "metrics.reporters": "snap,prom,logs",
            "metrics.reporter.snap.class": "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory",
            "metrics.reporter.snap.stream": "kafka.metrics",
            "metrics.reporter.snap.interval": "5",
            "metrics.reporter.prom.class": "prometheus",
            "metrics.reporter.prom.port": "9999",
            "metrics.reporter.logs.class": "log",
            "metrics.reporter.logs.interval.seconds": "2",
        }
    )
    assert found == [
        ReporterSpec("snap", "snapshot", SystemStream("kafka", "metrics"), interval_s=5),
        ReporterSpec("prom", "prometheus", port=9999),
        ReporterSpec("logs", "log", interval_s=2),
    ]


def test_a_reporter_named_like_a_kind_needs_no_class() -> None:
    found = specs(**{"metrics.reporters": "snapshot", "metrics.reporter.snapshot.stream": "kafka.m"})
    assert found == [ReporterSpec("snapshot", "snapshot", SystemStream("kafka", "m"))]


def test_jmx_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        found = specs(
            **{
                "metrics.reporters": "jmx",
                "metrics.reporter.jmx.class": "org.apache.samza.metrics.reporter.JmxReporterFactory",
            }
        )
    assert found == []
    assert "JMX" in caplog.text


def test_cross_key_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as raised:
        specs(
            **{
                "metrics.reporters": "mine,snapshot,a,b",
                "metrics.reporter.a.class": "prometheus",
                "metrics.reporter.a.port": "9000",
                "metrics.reporter.b.class": "prometheus",
                "metrics.reporter.b.port": "9000",
            }
        )
    problems = raised.value.problems
    assert len(problems) == 3
    assert "'metrics.reporter.mine.class' is required" in problems[0]
    assert "'metrics.reporter.snapshot.stream' is required" in problems[1]
    assert "both listen on port 9000" in problems[2]


def test_the_snapshot_stream_must_be_on_the_jobs_system() -> None:
    with pytest.raises(ConfigError, match="is on system 'other'"):
        specs(**{"metrics.reporters": "snapshot", "metrics.reporter.snapshot.stream": "other.m"})


def test_reporter_keys_are_checked_with_the_job_config() -> None:
    config = Config.from_dict(
        {
            **BASE,
            "metrics.reporters": "p",
            "metrics.reporter.p.class": "graphite",
            "metrics.reporter.p.port": "70000",
        }
    )
    with pytest.raises(ConfigError) as raised:
        parse_job_config(config)
    text = str(raised.value)
    assert "Invalid value 'graphite' for 'metrics.reporter.p.class'" in text
    assert "Invalid value '70000' for 'metrics.reporter.p.port'" in text


def test_a_misspelt_reporter_key_is_an_error_with_a_suggestion() -> None:
    keys = {
        "metrics.reporters": "prometheus",
        "metrics.reporter.prometheus.prot": "1",
        "metrics.timer.enabled": "x",
    }
    with pytest.raises(ConfigError) as raised:
        specs(**keys)
    (problem,) = raised.value.problems
    assert "Unknown key 'metrics.reporter.prometheus.prot'" in problem
    assert "did you mean 'metrics.reporter.prometheus.port'?" in problem


def test_keys_of_unlisted_reporters_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert specs(**{"metrics.reporter.prom.class": "prometheus"}) == []
    assert "'prom' is not in metrics.reporters" in caplog.text


# -- Prometheus -------------------------------------------------------------------------------


def sample_registry() -> MetricsRegistry:
    registry = MetricsRegistry()
    container = registry.group("container")
    container.counter("commit-calls").inc(2)
    container.counter("window-ns").inc(1500)
    task = registry.group("task.Partition 0")
    task.counter("messages-actually-processed").inc(7)
    task.gauge("label", lambda: "not a number")
    store = registry.group("store.counts.Partition 0")
    store.counter("puts").inc(3)
    store.gauge("restore-time").set(12)
    registry.group("store.counts.Partition 1").counter("puts").inc(4)
    registry.group("input.kafka.page.views.1").gauge("lag", lambda: 5)
    return registry


def prometheus_text(registry: MetricsRegistry) -> str:
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry, SOURCE))
    return generate_latest(collectors).decode()


def test_prometheus_text_names_every_numeric_metric_with_labels() -> None:
    text = prometheus_text(sample_registry())
    lines = set(text.splitlines())
    assert "# TYPE samzapy_container_commit_calls_total counter" in lines
    assert "samzapy_container_commit_calls_total 2.0" in lines
    assert "samzapy_container_window_seconds_total 1.5e-06" in lines  # ns counted, seconds exported
    assert 'samzapy_task_messages_actually_processed_total{task="Partition 0"} 7.0' in lines
    assert 'samzapy_store_puts_total{store="counts",task="Partition 0"} 3.0' in lines
    assert 'samzapy_store_puts_total{store="counts",task="Partition 1"} 4.0' in lines
    assert "# TYPE samzapy_store_restore_seconds gauge" in lines
    assert 'samzapy_store_restore_seconds{store="counts",task="Partition 0"} 0.012' in lines  # from ms
    assert 'samzapy_input_lag{partition="1",stream="page.views",system="kafka"} 5.0' in lines
    assert 'samzapy_container_info{container_name="samzapy-container-0",job_id="1",job_name="j"} 1.0' in lines
    assert "label" not in text  # text gauges are left out


def test_prometheus_reads_values_at_scrape_time() -> None:
    registry = sample_registry()
    counter = registry.group("store.counts.Partition 0").counter("puts")
    counter.inc(10)
    assert 'samzapy_store_puts_total{store="counts",task="Partition 0"} 13.0' in prometheus_text(registry)


def test_a_task_metric_that_is_a_gauge_somewhere_is_a_gauge_everywhere() -> None:
    registry = MetricsRegistry()
    registry.group("task.Partition 0").counter("my-metric").inc()
    registry.group("task.Partition 1").gauge("my-metric", lambda: 4)
    text = prometheus_text(registry)
    assert "# TYPE samzapy_task_my_metric gauge" in text
    assert 'samzapy_task_my_metric{task="Partition 1"} 4.0' in text
    assert "# HELP samzapy_task_my_metric 'my-metric', a metric the job's code defines" in text


def test_a_sum_of_counters_kept_as_a_gauge_is_a_prometheus_counter() -> None:
    registry = MetricsRegistry()
    registry.group("container").gauge("process-calls", lambda: 4)
    text = prometheus_text(registry)
    assert "# TYPE samzapy_container_process_calls_total counter" in text
    assert "samzapy_container_process_calls_total 4.0" in text


def test_latency_histograms_are_prometheus_histograms_in_seconds() -> None:
    registry = MetricsRegistry()
    registry.group("task.Partition 0").histogram("process-latency").observe(0.002, count=3)
    registry.group("container").histogram("commit-latency").observe(0.3)
    lines = set(prometheus_text(registry).splitlines())
    assert "# TYPE samzapy_task_process_latency_seconds histogram" in lines
    assert 'samzapy_task_process_latency_seconds_bucket{le="0.001",task="Partition 0"} 0.0' in lines
    assert 'samzapy_task_process_latency_seconds_bucket{le="0.005",task="Partition 0"} 3.0' in lines
    assert 'samzapy_task_process_latency_seconds_bucket{le="+Inf",task="Partition 0"} 3.0' in lines
    assert 'samzapy_task_process_latency_seconds_count{task="Partition 0"} 3.0' in lines
    assert 'samzapy_task_process_latency_seconds_sum{task="Partition 0"} 0.006' in lines
    assert 'samzapy_container_commit_latency_seconds_bucket{le="0.25"} 0.0' in lines
    assert 'samzapy_container_commit_latency_seconds_bucket{le="0.5"} 1.0' in lines


def test_every_catalogued_counter_ends_in_total_and_every_unit_is_a_base_unit() -> None:
    for name, doc in {**CATALOG, **HISTOGRAMS}.items():
        assert doc.unit in ("", "seconds", "bytes"), name
        assert not doc.name.endswith(("-ns", "-ms", "-s", "-time", "-total")), name
        assert doc.help.endswith(".") and len(doc.help) > 10, name


def test_promtool_accepts_every_name_samzapy_exports() -> None:
    # every catalogued metric and histogram, in a group of every kind (the kind is in the name)
    registry = MetricsRegistry()
    groups = ["container", "task.Partition 0", "store.s.Partition 0", "standby.s.Partition 1"]
    for group in [registry.group(name) for name in [*groups, "input.kafka.t.0", "async.Partition 0"]]:
        for name, doc in CATALOG.items():
            if doc.kind == "counter":
                group.counter(name).inc()
            else:
                group.gauge(name).set(1)
        for name in HISTOGRAMS:
            group.histogram(name).observe(0.01)
    # and a job's own metrics named like a histogram's series
    registry.group("task.Partition 0").gauge("queue-count").set(3)
    registry.group("task.Partition 0").counter("event-sum").inc(4)
    page = prometheus_text(registry)
    assert "samzapy_store_dirty_entries" in page  # Samza's dirty-count, not a reserved _count
    assert 'samzapy_task_queue_count_value{task="Partition 0"} 3.0' in page
    assert 'samzapy_task_event_sum_total{task="Partition 0"} 4.0' in page
    assert promtool_problems(page) == []


def test_every_metric_samzapy_registers_is_in_the_catalogue() -> None:
    # the names given to counter(), gauge() and histogram() in samzapy's own code
    sources = [*REPO.joinpath("samzapy").rglob("*.py"), *REPO.joinpath("stores").rglob("*.py")]
    names = set()
    for path in sources:
        if path.name != "metrics.py":
            names |= set(re.findall(r'\b(?:counter|gauge)\("([a-z0-9-]+)"', path.read_text()))
            names |= {f"histogram:{n}" for n in re.findall(r'\.histogram\("([a-z0-9-]+)"', path.read_text())}
    names.add("updates")  # side inputs count "restored-records" or "updates" through one call
    histograms = {n.removeprefix("histogram:") for n in names if n.startswith("histogram:")}
    assert histograms == set(HISTOGRAMS)
    assert {n for n in names if not n.startswith("histogram:")} == set(CATALOG)


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_http_server_serves_metrics_and_health() -> None:
    registry, status = sample_registry(), ContainerStatus()
    server = MetricsHttpServer(
        ReporterSpec("p", "prometheus", host="127.0.0.1", port=0), registry, status, SOURCE
    )
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        code, body = get(base + "/metrics")
        assert code == 200 and b'samzapy_store_puts_total{store="counts",task="Partition 0"} 3.0' in body
        status.restoring(["Partition 0"])
        code, body = get(base + "/health")
        health = json.loads(body)
        assert code == 503 and health["status"] == "restoring"
        assert health["tasks"] == {"Partition 0": {"status": "restoring", "processed": 7}}
        assert health["job"] == {"name": "j", "id": "1"}
        status.running()
        code, body = get(base + "/health")
        assert code == 200 and json.loads(body)["status"] == "running"
        status.failed("boom")
        code, body = get(base + "/health")
        assert code == 503 and json.loads(body)["error"] == "boom"
        assert get(base + "/nothing")[0] == 404
    finally:
        server.stop()


def test_a_port_in_use_is_a_clear_error() -> None:
    spec = ReporterSpec("p", "prometheus", host="127.0.0.1", port=0)
    first = MetricsHttpServer(spec, MetricsRegistry(), ContainerStatus(), SOURCE)
    first.start()
    try:
        taken = ReporterSpec("p", "prometheus", host="127.0.0.1", port=first.port)
        with pytest.raises(SamzapyError, match=r"cannot listen on .*metrics.reporter.p.port"):
            MetricsHttpServer(taken, MetricsRegistry(), ContainerStatus(), SOURCE).start()
    finally:
        first.stop()


# -- periodic reporters -----------------------------------------------------------------------


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.sent.append((topic, key, value))

    def flush(self, timeout_s: float | None = None) -> None:
        pass

    def close(self, timeout_s: float | None = None) -> None:
        pass


def test_snapshot_reporter_sends_samzas_metrics_snapshot_shape() -> None:
    spec = ReporterSpec("s", "snapshot", SystemStream("kafka", "metrics"), interval_s=60)
    reporter = SnapshotReporter(spec, sample_registry(), SOURCE, "unused:9092")
    reporter._producer = FakeProducer()
    producer = reporter._producer
    reporter.report(sample_registry().snapshot())
    ((topic, key, value),) = producer.sent
    message = json.loads(value)
    assert topic == "metrics" and key == b"j-1-samzapy-container-0"
    header = message["header"]
    assert {"job-name", "job-id", "container-name", "source", "time", "version"} <= set(header)
    assert (header["job-name"], header["job-id"], header["container-name"]) == (
        "j",
        "1",
        "samzapy-container-0",
    )
    assert isinstance(header["time"], int)
    assert message["metrics"]["store.counts.Partition 0"] == {"puts": 3, "restore-time": 12}


def test_periodic_reporters_report_once_more_at_stop(caplog: pytest.LogCaptureFixture) -> None:
    reporter = LogReporter(ReporterSpec("l", "log", interval_s=3600), sample_registry(), SOURCE)
    with caplog.at_level(logging.INFO, logger="samzapy.reporters.periodic"):
        reporter.start()
        reporter.stop()
    assert reporter.reports == 1
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("metrics ")]
    assert json.loads(line.removeprefix("metrics "))["container"]["commit-calls"] == 2


def test_reporters_start_http_first_and_stop_all() -> None:
    registry, status = MetricsRegistry(), ContainerStatus()
    reporters = Reporters(
        [
            ReporterSpec("l", "log", interval_s=3600),
            ReporterSpec("p", "prometheus", host="127.0.0.1", port=0),
        ],
        registry,
        status,
        SOURCE,
    )
    reporters.start("unused:9092")
    assert [r.spec.name for r in reporters.running] == ["p", "l"]
    port = reporters.http_port()
    assert port is not None and get(f"http://127.0.0.1:{port}/health")[0] == 503
    reporters.stop()
    assert reporters.running == []


# -- derived container gauges -----------------------------------------------------------------


def test_container_gauges_sum_tasks_and_read_lag_from_the_consumer() -> None:
    registry = MetricsRegistry()
    ssp = SystemStreamPartition("kafka", "in", 0)
    tasks = []
    for n in range(2):
        metrics = registry.group(f"task.Partition {n}")
        metrics.counter("messages-actually-processed").inc(10 + n)
        metrics.counter("process-ns").inc(100)
        tasks.append(SimpleNamespace(metrics=metrics, offsets={ssp: 40} if n == 0 else {}))
    part = SimpleNamespace(ssp=ssp, tp=TopicPartition("in", 0), task=tasks[0], start_offset=0, start_end=30)
    consumer = SimpleNamespace(highwater=lambda tp: 50)
    inputs = SimpleNamespace(partitions={part.tp: part}, consumer=consumer)
    register_container_gauges(registry, lambda: tasks, inputs)
    snapshot = registry.snapshot()
    assert snapshot["container"] == {
        "process-calls": 21,
        "messages-actually-processed": 21,
        "process-ns": 200,
        "window-calls": 0,
    }
    assert snapshot["task.Partition 1"]["process-calls"] == 11
    assert snapshot["input.kafka.in.0"] == {"offset": 40, "high-watermark": 50, "lag": 10}
    tasks[0].offsets[ssp] = 50
    assert registry.snapshot()["input.kafka.in.0"]["lag"] == 0


def test_reporters_from_config_name_the_container_and_its_start() -> None:
    config = Config.from_dict({**BASE, "metrics.reporters": "log"})
    job = parse_job_config(config)
    reporters = Reporters.from_job(job, MetricsRegistry(), ContainerStatus(), container_id=2)
    assert [s.kind for s in reporters.specs] == ["log"]
    assert reporters.source.container_name == "samzapy-container-2"
    assert reporters.source.source == "j-1-samzapy-container-2"
    assert reporters.source.reset_time_ms > 1_700_000_000_000


def test_every_catalogued_metric_is_documented_with_its_prometheus_name() -> None:
    doc = (REPO / "docs" / "operations.md").read_text()
    missing = [name for name in {**CATALOG, **HISTOGRAMS} if f"| `{name}` (" not in doc]
    assert not missing, f"docs/operations.md has no row for {missing}"
    for row in re.findall(r"^\| `([a-z0-9-]+)` \((\w+)\) \| `(\w+)`", doc, flags=re.MULTILINE):
        name, kind, exported = row
        doc_entry = CATALOG.get(name) or HISTOGRAMS[name]
        suffix = "_total" if doc_entry.kind == "counter" else ""
        assert exported == metric_name(kind, name) + suffix, row

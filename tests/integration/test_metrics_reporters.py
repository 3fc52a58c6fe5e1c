"""Metrics reporters of a running job on the dev broker: the Prometheus endpoint serves the
named metrics, the snapshot stream receives JSON snapshots, /health says restoring then
running, and the checkpoint tool refuses to touch a running job."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from promtool_support import promtool_problems
from support import (
    committed_changelog,
    consume_all,
    counting_job,
    create_topic,
    produce,
    start_job,
    wait_for,
    write_config,
)

from samzapy.cli import main
from samzapy.kafka.broker import free_port

pytestmark = pytest.mark.integration

MESSAGES = {0: 1200, 1: 800}
SNAPSHOT_FACTORY = "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory"
#: Changelog records the store of Partition 0 restores before the job runs: enough for the
#: restore to take a visible moment.
CHANGELOG = 60_000


def get(url: str) -> tuple[int, bytes] | None:
    """HTTP status and body, or ``None`` while nothing listens."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return None


def samples(text: str) -> dict[str, float]:
    """Prometheus text -> {'name{labels}': value}."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


def test_prometheus_snapshot_and_health_of_a_running_job(tmp_path: Path, broker: str) -> None:
    name = "metrics-job"
    create_topic(broker, f"{name}-in", 2)
    for partition, count in MESSAGES.items():
        produce(broker, f"{name}-in", [(f"k{i % 50}".encode(), b"1") for i in range(count)], partition)
    port = free_port()
    config = write_config(
        tmp_path / "job.properties",
        counting_job(
            name,
            broker,
            tmp_path / "state",
            **{
                "task.commit.ms": "300",
                "metrics.reporters": "prom,snap,jmx",
                "metrics.reporter.prom.class": "prometheus",
                "metrics.reporter.prom.host": "127.0.0.1",
                "metrics.reporter.prom.port": str(port),
                "metrics.reporter.snap.class": SNAPSHOT_FACTORY,
                "metrics.reporter.snap.stream": f"kafka.{name}-metrics",
                "metrics.reporter.snap.interval.seconds": "1",
                "metrics.reporter.jmx.class": "org.apache.samza.metrics.reporter.JmxReporterFactory",
            },
        ),
    )
    committed_changelog(broker, config, CHANGELOG)  # so that the job starts with a restore

    base = f"http://127.0.0.1:{port}"
    process = start_job(config, log=tmp_path / "job.log")
    try:
        # /health from the first moment it answers: restoring (503) until running (200)
        seen: list[tuple[int, str]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not seen or seen[-1][1] != "running"):
            answer = get(base + "/health")
            if answer is not None:
                seen.append((answer[0], json.loads(answer[1])["status"]))
            time.sleep(0.01)
        statuses = [s for _, s in seen]
        assert statuses[0] == "restoring" and statuses[-1] == "running", statuses
        assert set(statuses) == {"restoring", "running"}
        assert all(code == (200 if s == "running" else 503) for code, s in seen)
        code, body = get(base + "/health")
        health = json.loads(body)
        assert code == 200 and set(health["tasks"]) == {"Partition 0", "Partition 1"}
        assert health["job"] == {"name": name, "id": "1"} and health["container"] == "samzapy-container-0"

        # /metrics: the named metrics, read at scrape time
        def scraped() -> dict[str, float]:
            answer = get(base + "/metrics")
            assert answer is not None and answer[0] == 200
            return samples(answer[1].decode())

        total = sum(MESSAGES.values())
        wait_for(
            lambda: scraped().get("samzapy_container_messages_actually_processed_total") == total,
            timeout=30,
            what="every message processed",
        )
        wait_for(lambda: scraped().get("samzapy_container_commit_calls_total", 0) >= 2, timeout=10)
        metrics = scraped()
        assert promtool_problems(get(base + "/metrics")[1].decode()) == []  # the whole page, by promtool
        for metric in (
            "samzapy_container_process_calls_total",
            "samzapy_container_process_seconds_total",
            "samzapy_container_window_calls_total",
            "samzapy_container_window_seconds_total",
            "samzapy_container_commit_seconds_total",
            "samzapy_container_commit_latency_seconds_count",
            "process_resident_memory_bytes",
            'python_gc_collections_total{generation="0"}',
        ):
            assert metric in metrics, metric
        assert metrics["samzapy_container_process_calls_total"] == total
        for partition, count in MESSAGES.items():
            task = f'task="Partition {partition}"'
            labels = f'partition="{partition}",stream="{name}-in",system="kafka"'
            assert metrics[f"samzapy_task_messages_actually_processed_total{{{task}}}"] == count
            assert metrics[f"samzapy_task_process_calls_total{{{task}}}"] == count
            assert metrics[f'samzapy_task_process_latency_seconds_bucket{{le="+Inf",{task}}}'] == count
            assert metrics[f"samzapy_input_offset{{{labels}}}"] == count
            assert metrics[f"samzapy_input_lag{{{labels}}}"] == 0
            # The high watermark comes from the consumer's fetches; the dev broker may
            # report it low (DESIGN §10), never high.
            assert 0 < metrics[f"samzapy_input_high_watermark{{{labels}}}"] <= count
            assert metrics[f'samzapy_store_puts_total{{store="counts",{task}}}'] > 0
        restored = metrics['samzapy_store_restored_messages_total{store="counts",task="Partition 0"}']
        assert restored == CHANGELOG
        assert metrics['samzapy_store_restore_latency_seconds_count{store="counts",task="Partition 0"}'] == 1
        assert metrics['samzapy_store_disk_bytes{store="counts",task="Partition 0"}'] > 0
        assert (
            'samzapy_container_info{container_name="samzapy-container-0",job_id="1",job_name="metrics-job"}'
            in (metrics)
        )

        # the checkpoint tool will not touch a running job
        result = CliRunner().invoke(
            main, ["checkpoint", "set", "--config-path", str(config), "--to-oldest", "--yes"]
        )
        assert result.exit_code == 1 and "is running" in result.output

        # snapshots arrive while the job runs
        wait_for(lambda: len(consume_all(broker, f"{name}-metrics")) >= 2, timeout=15, what="two snapshots")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0

    snapshots = [orjson.loads(r.value) for r in consume_all(broker, f"{name}-metrics")]
    for snapshot in snapshots:
        header = snapshot["header"]
        assert (header["job-name"], header["job-id"], header["container-name"]) == (
            name,
            "1",
            "samzapy-container-0",
        )
        assert {"source", "time", "version"} <= set(header)
        assert "container" in snapshot["metrics"]  # tasks and stores appear once restored
    times = [s["header"]["time"] for s in snapshots]
    assert times == sorted(times)
    last = snapshots[-1]["metrics"]  # sent at stop, after the final commit
    assert {
        "task.Partition 0",
        "task.Partition 1",
        "store.counts.Partition 0",
        f"input.kafka.{name}-in.0",
    } <= set(last)
    assert last["container"]["messages-actually-processed"] == total
    assert last["store.counts.Partition 0"]["restored-messages"] == CHANGELOG
    log = (tmp_path / "job.log").read_text()
    assert "JMX reporter" in log and re.search(r"Prometheus metrics at http://127\.0\.0\.1:\d+/metrics", log)

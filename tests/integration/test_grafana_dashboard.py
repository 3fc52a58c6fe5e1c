"""The Grafana dashboard in deploy/grafana queries only series a running job exports: a
group-mode member (so that the rebalance panels have their series) is scraped, and every
metric name in every panel's PromQL must be among the scraped sample names."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from group_support import member_config
from prometheus_client.parser import text_string_to_metric_families
from support import create_topic, kill9, produce, start_job, wait_for

from samzapy.kafka.broker import free_port

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "samzapy-dashboard.json"
#: PromQL words that are not metric names.
PROMQL = {
    "sum",
    "by",
    "rate",
    "increase",
    "histogram_quantile",
    "max",
    "le",
    "instance",
    "job",
    "store",
    "stream",
    "partition",
    "task",
}


def queried_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) >= 12
    names = set()
    for expr in exprs:
        bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", "", expr)  # label matchers, ranges, strings
        names |= {w for w in re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", bare) if w not in PROMQL}
    return names


def scraped(url: str) -> set[str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def test_every_series_the_dashboard_queries_is_exported_by_a_running_job(tmp_path: Path, broker: str) -> None:
    name = "grafana-job"
    create_topic(broker, f"{name}-in", 2)
    produce(broker, f"{name}-in", [(f"k{i}".encode(), b"v") for i in range(200)])
    port = free_port()
    config = member_config(
        tmp_path,
        broker,
        name,
        "m1",
        **{
            "metrics.reporters": "prom",
            "metrics.reporter.prom.class": "prometheus",
            "metrics.reporter.prom.port": str(port),
        },
    )
    process = start_job(config, log=tmp_path / "job.log")
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def processed_all() -> bool:
            try:
                text = urllib.request.urlopen(url, timeout=2).read().decode()
            except OSError:
                return False
            counts = re.findall(
                r"^samzapy_task_messages_actually_processed_total\{[^}]*\} (\S+)$", text, re.M
            )
            return sum(float(c) for c in counts) == 200

        wait_for(processed_all, 90, what="the member to process its input")
        wait_for(
            lambda: "samzapy_container_commit_latency_seconds_bucket" in scraped(url), 30, what="a commit"
        )
        exported = scraped(url)
        missing = sorted(queried_metrics() - exported)
        assert not missing, f"the dashboard queries series no job exports: {missing}"
    finally:
        kill9(process)

"""The parent of ``samzapy run --processes N``: its merged pages over members' real HTTP
servers, and the command line's refusal outside group mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from samzapy.cli import main
from samzapy.container.process_pages import Member, merged_health, merged_metrics, merged_status
from samzapy.http_server import TEXT, BackgroundHttpServer

EXPOSITION = """# HELP samzapy_task_messages_actually_processed_total Messages processed by process().
# TYPE samzapy_task_messages_actually_processed_total counter
samzapy_task_messages_actually_processed_total{{task="Partition {task}"}} {count}
"""


def _status(task: int, rate: float) -> bytes:
    document = {
        "container": {"name": "group member", "status": "running"},
        "totals": {"processed": 10, "messages_per_s": rate, "lag": 1},
        "tasks": [{"name": f"Partition {task}"}],
    }
    return json.dumps(document).encode()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    """Two members serving /metrics, /health and /status.json; a third that never started."""
    servers = []
    for index in range(2):
        server = BackgroundHttpServer("127.0.0.1", 0, what="member", port_key="-", thread_name=f"m{index}")
        body = EXPOSITION.format(task=index, count=100 + index).encode()
        status = _status(index, 5.0 + index)
        server.add_route("/metrics", lambda t, h, body=body: (200, TEXT, body))
        server.add_route("/health", lambda t, h: (200, TEXT, b"ok"))
        server.add_route("/status.json", lambda t, h, status=status: (200, "application/json", status))
        server.start()
        servers.append(server)
    yield [Member(i, f"http://127.0.0.1:{s.port}", 1000 + i) for i, s in enumerate(servers)] + [
        Member(2, None, None)
    ]
    for server in servers:
        server.stop()


def test_metrics_are_merged_with_a_process_label(members: list[Member]) -> None:
    families = {f.name: f for f in text_string_to_metric_families(merged_metrics(members, None).decode())}
    processed = families["samzapy_task_messages_actually_processed"]
    assert sorted((s.labels["process"], s.labels["task"], s.value) for s in processed.samples) == [
        ("0", "Partition 0", 100.0),
        ("1", "Partition 1", 101.0),
    ]
    up = {s.labels["process"]: s.value for s in families["samzapy_process_up"].samples}
    assert up == {"0": 1.0, "1": 1.0, "2": 0.0}


def test_status_and_health_cover_every_member(members: list[Member]) -> None:
    status = merged_status(members, None)
    assert status is not None
    assert [t["name"] for t in status["tasks"]] == ["Partition 0", "Partition 1"]
    assert status["totals"]["messages_per_s"] == 11.0 and status["totals"]["processed"] == 20
    assert [p["name"] for p in status["peers"]] == [
        "process 0 (pid 1000)",
        "process 1 (pid 1001)",
        "process 2",
    ]
    assert "error" in status["peers"][2]
    assert merged_health(members[:2], None)[0] == 200
    assert merged_health(members, None) == (503, b"processes not healthy: 2\n")


def test_processes_outside_group_mode_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "job.properties"
    config.write_text("job.name=j\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.a\n")
    result = CliRunner().invoke(main, ["run", str(config), "--processes", "2"])
    assert result.exit_code == 2
    assert "need group mode (job.coordinator.factory=group)" in result.output

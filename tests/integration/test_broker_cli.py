"""``samzapy broker start|status|stop`` through click's CliRunner, on a free port."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.cli.broker import broker
from samzapy.kafka import broker as dev_broker

pytestmark = pytest.mark.integration


def test_start_status_stop(tmp_path: Path) -> None:
    runner = CliRunner()
    port = dev_broker.free_port()
    state = ["--state-dir", str(tmp_path)]

    stopped = runner.invoke(broker, ["status", *state])
    assert stopped.exit_code == 1
    assert "Error: no broker is running" in stopped.output

    started = runner.invoke(broker, ["start", "--port", str(port), *state])
    try:
        assert started.exit_code == 0, started.output
        assert f"started at 127.0.0.1:{port}" in started.output
        assert "memory only" in started.output
        assert dev_broker.port_open(port)

        again = runner.invoke(broker, ["start", "--port", str(port), *state])
        assert again.exit_code == 0
        assert f"already running at 127.0.0.1:{port}" in again.output

        running = runner.invoke(broker, ["status", *state])
        assert running.exit_code == 0
        assert f"broker running at 127.0.0.1:{port}" in running.output
    finally:
        halted = runner.invoke(broker, ["stop", *state])
    assert halted.exit_code == 0
    assert f"stopped the broker at 127.0.0.1:{port}" in halted.output
    assert runner.invoke(broker, ["status", *state]).exit_code == 1
    assert "no broker is running" in runner.invoke(broker, ["stop", *state]).output


def test_start_on_a_taken_port_fails_with_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(broker, ["start", "--port", str(port), "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert f"Error: port {port} on 127.0.0.1 is already in use" in result.output


def test_bad_port_is_a_usage_error() -> None:
    result = CliRunner().invoke(broker, ["start", "--port", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in result.output


def test_a_second_start_on_another_port_says_where_the_broker_runs(tmp_path: Path) -> None:
    runner = CliRunner()
    port, other = dev_broker.free_port(), dev_broker.free_port()
    state = ["--state-dir", str(tmp_path)]
    started = runner.invoke(broker, ["start", "--port", str(port), *state])
    try:
        assert started.exit_code == 0, started.output
        pid = dev_broker.status(tmp_path).pid
        again = runner.invoke(broker, ["start", "--port", str(other), *state])
        assert again.exit_code == 1
        assert again.stderr == (
            f"Error: a broker already runs at 127.0.0.1:{port} (pid {pid}), not on port {other} "
            f"(--port): use that one, or stop it first with: samzapy broker stop\n"
        )
        assert not dev_broker.port_open(other)
        by_env = runner.invoke(broker, ["start", *state], env={"SAMZAPY_BROKER_PORT": str(other)})
        assert by_env.exit_code == 1
        assert f"not on port {other} (SAMZAPY_BROKER_PORT)" in by_env.stderr
    finally:
        runner.invoke(broker, ["stop", *state])


def test_start_honours_samzapy_broker_port(tmp_path: Path) -> None:
    runner = CliRunner()
    port = dev_broker.free_port()
    state = ["--state-dir", str(tmp_path)]
    started = runner.invoke(broker, ["start", *state], env={"SAMZAPY_BROKER_PORT": str(port)})
    try:
        assert started.exit_code == 0, started.output
        assert f"broker started at 127.0.0.1:{port}" in started.output
        assert dev_broker.port_open(port)
    finally:
        runner.invoke(broker, ["stop", *state])

"""`samzapy run` with a bad configuration exits 2, naming file:line, before connecting to anything.

The bootstrap servers point at a port this test listens on: a Kafka client that tried to
connect would complete a TCP handshake there (the kernel queues it even before accept), so an
empty accept queue after the run proves that no connection was attempted.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Generous on a loaded machine; a run that tried the broker would retry for much longer.
FAST_S = 30.0


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock
    sock.close()


def job_file(tmp_path: Path, port: int, extra: str) -> Path:
    file = tmp_path / "job.properties"
    file.write_text(
        "job.name=early\n"
        "task.class=samzapy.task:StreamTask\n"
        "task.inputs=kafka.pageviews\n"
        f"systems.kafka.consumer.bootstrap.servers=127.0.0.1:{port}\n"
        f"job.logged.store.base.dir={tmp_path / 'state'}\n"
        "stores.counts.factory=rocksdb\n"
        "stores.counts.changelog=kafka.counts-changelog\n" + extra
    )
    return file


def run(file: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "samzapy", "run", str(file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result, time.monotonic() - started


def assert_nothing_connected(listener: socket.socket) -> None:
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()


@pytest.mark.parametrize(
    ("extra", "line", "expected"),
    [
        (
            "stores.counts.object.cache.size=10\n"  # line 8
            "stores.counts.write.batch.size=500\n",
            8,
            "is smaller than 'stores.counts.write.batch.size' (500, {file}:9)",
        ),
        (
            "metrics.reporters=prometheus\nmetrics.reporter.prometheus.prot=9404\n",  # line 9
            9,
            "Unknown key 'metrics.reporter.prometheus.prot' ({file}:9): did you mean "
            "'metrics.reporter.prometheus.port'?",
        ),
        (
            "metrics.reporters=snapshot\n"
            "metrics.reporter.snapshot.stream=kafka.metrics\n"
            "metrics.reporter.snapshot.interval.seconds=soon\n",  # line 10
            10,
            "Invalid value 'soon' for 'metrics.reporter.snapshot.interval.seconds' ({file}:10)",
        ),
    ],
    ids=["cache-smaller-than-batch", "misspelt-reporter-key", "bad-reporter-value"],
)
def test_a_bad_config_exits_2_naming_file_and_line_without_connecting(
    tmp_path: Path, listener: socket.socket, extra: str, line: int, expected: str
) -> None:
    file = job_file(tmp_path, listener.getsockname()[1], extra)
    result, elapsed = run(file)
    assert result.returncode == 2, result.stderr
    assert f"{file}:{line}" in result.stderr
    assert expected.format(file=file) in result.stderr
    assert elapsed < FAST_S
    assert_nothing_connected(listener)
    assert not (tmp_path / "state").exists()


def test_every_problem_comes_in_the_one_error(tmp_path: Path, listener: socket.socket) -> None:
    file = job_file(
        tmp_path,
        listener.getsockname()[1],
        "stores.counts.object.cache.size=10\n"  # line 8
        "metrics.reporters=prometheus\n"
        "metrics.reporter.prometheus.prot=9404\n",  # line 10
    )
    result, _ = run(file)
    assert result.returncode == 2
    assert "2 problems in" in result.stderr
    assert f"'stores.counts.object.cache.size' (10, {file}:8)" in result.stderr
    assert f"Unknown key 'metrics.reporter.prometheus.prot' ({file}:10)" in result.stderr
    assert_nothing_connected(listener)

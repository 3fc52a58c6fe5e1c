"""A broker outage is waited out, not fatal (issue 21 item 5).

The job's own dev broker (not the session's shared one) is paused with SIGSTOP for longer than
the old limit (a fencing read failed after 30 s with a raw KafkaTimeoutError): the job logs a
line per retry, ``/health`` says "broker unreachable since ...", and when the broker is back
the job goes on; its counts end exact. A second pause shows that SIGTERM is honoured during an
outage: the job stops without a commit, and a restart is exact.

Real dev broker (Tansu) process, RocksDB stores, job subprocesses.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import (
    changelog_counts,
    create_topic,
    kill9,
    produce,
    read_counts,
    run_job,
    start_job,
    wait_for,
    write_config,
)

from samzapy.checkpoint import read_checkpoints
from samzapy.kafka import broker as dev_broker

pytestmark = [pytest.mark.integration, pytest.mark.crash]

NAME = "outage"
PARTITIONS = 2
PAUSE_S = 40  # longer than the 30 s after which the fencing read used to fail the job


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[dev_broker.BrokerInfo]:
    """A dev broker of this test alone: pausing the session's would stall other tests."""
    state_dir = tmp_path / "broker"
    info = dev_broker.start(port=dev_broker.free_port(), state_dir=state_dir)
    try:
        yield info
    finally:
        os.kill(info.pid, signal.SIGCONT)
        dev_broker.stop(state_dir)


def produce_keyed(broker: str, count: int, seed: int) -> Counter:
    rng = random.Random(seed)
    keyed = [f"key-{rng.randrange(300)}" for _ in range(count)]
    produce(broker, f"{NAME}-in", ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


def committed(broker: str) -> int:
    """Input messages the job has committed, over all tasks."""
    found = read_checkpoints(broker, f"__samza_checkpoint_ver_1_for_{NAME}_1")
    return sum(o for c in found.values() for o in c.input_offsets.values())


def health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return json.loads(error.read())
    except OSError:
        return None


def log_lines(path: Path, text: str) -> list[str]:
    return [line for line in path.read_text().splitlines() if text in line]


def test_a_paused_broker_is_waited_out_and_sigterm_is_honoured_meanwhile(tmp_path, own_broker):
    broker = own_broker.bootstrap_servers
    state = tmp_path / "state"
    port = dev_broker.free_port()
    create_topic(broker, f"{NAME}-in", PARTITIONS)
    config = write_config(
        tmp_path / "job.properties",
        {
            "job.name": NAME,
            "task.class": "stateful_tasks:CountingTask",
            "task.inputs": f"kafka.{NAME}-in",
            "task.commit.ms": "500",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.changelog": f"kafka.{NAME}-counts-changelog",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "job.logged.store.base.dir": str(state),
            "metrics.reporters": "prom",
            "metrics.reporter.prom.class": "prometheus",
            "metrics.reporter.prom.host": "127.0.0.1",
            "metrics.reporter.prom.port": str(port),
        },
    )
    log = tmp_path / "job.log"
    expected = produce_keyed(broker, 10_000, seed=1)
    job = start_job(config, log=log)
    try:
        wait_for(lambda: committed(broker) == 10_000, timeout=120, what="the first input to be committed")

        # 1. A pause longer than the old limit while input is in flight: waited out.
        expected += produce_keyed(broker, 10_000, seed=2)
        os.kill(own_broker.pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        wait_for(lambda: log_lines(log, "unreachable since"), timeout=30, what="a retry line in the log")
        answer = health(port)
        assert answer is not None and answer["status"] == "running"
        assert answer["broker"].startswith("unreachable since ")
        time.sleep(max(0.0, PAUSE_S - (time.monotonic() - paused_at)))
        assert job.poll() is None, log.read_text()[-3000:]
        os.kill(own_broker.pid, signal.SIGCONT)
        wait_for(lambda: committed(broker) == 20_000, timeout=120, what="the job to go on after the pause")
        assert "broker" not in health(port)
        retries = log_lines(log, "unreachable since")
        assert len(retries) >= 2, retries  # one line per attempt
        assert "retrying in" in retries[0] and "task.broker.unavailable.ms=300000" in retries[0]
        assert not log_lines(log, "Traceback")

        # 2. SIGTERM during an outage: a clean stop, without a commit.
        expected += produce_keyed(broker, 5_000, seed=3)
        os.kill(own_broker.pid, signal.SIGSTOP)
        seen = len(retries)
        wait_for(lambda: len(log_lines(log, "unreachable since")) > seen, timeout=30, what="a retry line")
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=30) == 0, log.read_text()[-3000:]
        assert log_lines(log, "stopping without a commit")
        os.kill(own_broker.pid, signal.SIGCONT)
    finally:
        os.kill(own_broker.pid, signal.SIGCONT)
        if job.poll() is None:
            kill9(job)

    restart = run_job(config, "--exit-at-end")
    assert restart.returncode == 0, restart.stderr[-3000:]
    assert read_counts(state) == dict(expected)
    assert changelog_counts(broker, f"{NAME}-counts-changelog")[0] == dict(expected)

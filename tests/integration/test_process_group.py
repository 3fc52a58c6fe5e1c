"""``samzapy run --processes 2`` (issue 32 item 5): two group members under one parent on this
host; a kill -9 of one is healed by the parent, the counts stay exact, and the parent serves
one status page and one ``/metrics`` for both.

Real dev broker, RocksDB stores, a real parent process and its members (SIGKILL, SIGTERM).
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
from group_support import PARTITIONS, checkpointed_total, member_config, produce_keyed
from support import changelog_counts, create_topic, kill9, start_job, wait_for

from samzapy.container.process_pages import fetch
from samzapy.kafka.broker import free_port

pytestmark = pytest.mark.integration


def _pids(log_text: str, index: int) -> list[int]:
    return [int(p) for p in re.findall(rf"process {index} of 2 started \(pid (\d+)\)", log_text)]


def _status(port: int) -> dict | None:
    got = fetch(f"http://127.0.0.1:{port}/status.json", None)
    return json.loads(got[1]) if got is not None and got[0] == 200 else None


def _both_have_tasks(port: int) -> bool:
    status = _status(port)
    if status is None or len(status["tasks"]) != PARTITIONS:
        return False
    return len(status["peers"]) == 2 and all(p.get("tasks") for p in status["peers"])


def test_two_processes_heal_a_kill9_and_count_exactly(tmp_path, broker):
    name = "procs"
    topic = f"{name}-in"
    create_topic(broker, topic, PARTITIONS)
    expected = produce_keyed(broker, topic, 6_000, 300, seed=3)
    port = free_port()
    reporter = {
        "metrics.reporters": "prom",
        "metrics.reporter.prom.class": "prometheus",
        "metrics.reporter.prom.port": str(port),
    }
    config = member_config(tmp_path, broker, name, "host", **reporter)
    log = tmp_path / "host.log"
    parent = start_job(config, "--processes", "2", log=log)
    try:
        wait_for(lambda: _both_have_tasks(port), 120, what="both processes to run tasks")
        [first] = _pids(log.read_text(), 1)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: len(_pids(log.read_text(), 1)) == 2, 60, what="the parent to restart process 1")
        assert "process 1 ended unasked (signal SIGKILL" in log.read_text()
        expected.update(produce_keyed(broker, topic, 4_000, 300, seed=4))
        wait_for(
            lambda: checkpointed_total(broker, f"__samza_checkpoint_ver_1_for_{name}_1") == 10_000,
            120,
            what="every message processed",
        )
        wait_for(lambda: _both_have_tasks(port), 120, what="the restarted process to take its share")
        got = fetch(f"http://127.0.0.1:{port}/metrics", None)
        assert got is not None and got[0] == 200
        text = got[1].decode()
        assert 'samzapy_process_up{process="0"} 1.0' in text and 'samzapy_process_up{process="1"} 1.0' in text
        processed = re.findall(
            r'^samzapy_task_messages_actually_processed_total\{.*process="(\d)".*\} ', text, re.M
        )
        assert set(processed) == {"0", "1"}, text[:2000]
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if parent.poll() is None:
            kill9(parent)  # its members get SIGTERM from the kernel (parent-death signal)
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)
    assert "all 2 processes stopped" in log.read_text()

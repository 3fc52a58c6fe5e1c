"""A second ``samzapy run`` of the same job and container refuses at once, naming the running
copy; ``--take-over`` stops the running copy (it commits) and takes its tasks (issue 31 item 4)."""

from __future__ import annotations

import json
import re
import socket

import pytest
from support import (
    counting_job,
    create_topic,
    produce,
    read_store,
    run_job,
    start_job,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration


def test_a_second_copy_exits_2_naming_the_first_and_take_over_stops_it(tmp_path, broker):
    name = "second-copy"
    create_topic(broker, f"{name}-in", 2)
    produce(broker, f"{name}-in", [(f"k{i % 5}".encode(), b"{}") for i in range(50)])
    state = tmp_path / "state"
    config = write_config(tmp_path / "job.properties", counting_job(name, broker, state))
    lock = state / f".samzapy-{name}-1-container-0.lock"
    first = start_job(config, log=tmp_path / "first.log")
    try:
        wait_for(lambda: lock.exists() and lock.read_text().startswith("{"), what="the first copy's lock")
        holder = json.loads(lock.read_text())
        assert holder["pid"] == first.pid

        second = run_job(config, timeout=30)

        assert second.returncode == 2, second.stderr[-2000:]
        error = second.stderr.strip().splitlines()[-1]
        host = re.escape(socket.gethostname())
        assert re.fullmatch(
            rf"Error: job '{name}' \(id 1\), container 0 already runs \(host {host}"
            rf", pid {first.pid}, since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC; lock {re.escape(str(lock))}\): "
            rf"stop it first \(kill {first.pid}, or Ctrl-C where it runs\), or start this one with "
            r"--take-over to stop it and take its tasks",
            error,
        ), error
        assert first.poll() is None  # the running copy was left alone

        taken = run_job(config, "--take-over", "--exit-at-end")

        assert taken.returncode == 0, taken.stderr[-3000:]
        assert first.wait(timeout=30) == 0  # SIGTERM: a clean stop with a commit
        assert read_store(state, "counts", bytes.decode, json.loads) == {f"k{i}": 10 for i in range(5)}
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()

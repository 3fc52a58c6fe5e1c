"""One running copy of a passthrough container per state directory (samzapy.instance_lock)."""

from __future__ import annotations

import os
import socket

import pytest
from click.testing import CliRunner

from samzapy.cli.app import main
from samzapy.cli.run import _one_copy
from samzapy.config import load_config, parse_job_config
from samzapy.errors import BadArgumentError
from samzapy.instance_lock import AlreadyRunning, InstanceLock, lock_path


def _job(tmp_path, **extra: str):
    lines = {
        "job.name": "lonely",
        "task.class": "samzapy.task:StreamTask",
        "task.inputs": "kafka.in",
        "systems.kafka.consumer.bootstrap.servers": "127.0.0.1:1",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        **extra,
    }
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def test_a_held_lock_names_its_holder_and_is_free_again_once_released(tmp_path):
    path = lock_path(tmp_path, "j", "1", 0)
    first = InstanceLock(path, "job 'j' (id 1), container 0")
    first.acquire()

    with pytest.raises(AlreadyRunning) as raised:
        InstanceLock(path, "job 'j' (id 1), container 0").acquire()

    assert isinstance(raised.value, BadArgumentError)  # exit 2
    assert raised.value.holder is not None
    assert (raised.value.holder.host, raised.value.holder.pid) == (socket.gethostname(), os.getpid())
    first.release()
    with InstanceLock(path, "again") as again:
        again.acquire()
        assert again.holder().pid == os.getpid()


def test_samzapy_run_refuses_at_once_while_the_container_runs(tmp_path):
    config = _job(tmp_path)
    running = InstanceLock(lock_path(tmp_path / "state", "lonely", "1", 0), "the running copy")
    running.acquire()
    try:
        result = CliRunner().invoke(main, ["run", str(config)])
    finally:
        running.release()

    assert result.exit_code == 2
    assert (
        f"Error: job 'lonely' (id 1), container 0 already runs (host {socket.gethostname()}, pid"
        in result.output
    )
    assert "--take-over" in result.output


def test_group_mode_takes_no_lock(tmp_path):
    group = parse_job_config(load_config(_job(tmp_path, **{"job.coordinator.factory": "group"})))
    with _one_copy(group, 0, take_over=False):
        assert not lock_path(tmp_path / "state", "lonely", "1", 0).exists()

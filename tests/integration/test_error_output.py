"""Error output a person can read (issue 21, item 7): a failing container or tool prints one
``Error:`` line with the cause and the fix; the traceback only with ``-v`` or in the log
file; never a chain of "During handling of the above exception" on the console. Real
subprocesses, the real dev broker."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rocksdict import Options, Rdict
from support import create_topic, job_env, produce, run_job, write_config

pytestmark = pytest.mark.integration

CHAIN = "During handling of the above exception"


def _config(tmp_path: Path, broker: str, name: str, task: str) -> Path:
    create_topic(broker, f"{name}-in", 1)
    produce(broker, f"{name}-in", [(None, f"item-{i}".encode()) for i in range(10)], partition=0)
    return write_config(
        tmp_path / f"{name}.properties",
        {
            "job.name": name,
            "task.class": f"failing_tasks:{task}",
            "task.inputs": f"kafka.{name}-in",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.msg.serde": "string",
            f"systems.kafka.streams.{name}-in.samza.offset.default": "oldest",
            "job.logged.store.base.dir": str(tmp_path / "state"),
        },
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def _samzapy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samzapy", *args], env=job_env(), capture_output=True, text=True, timeout=180
    )


def test_a_task_that_raises_prints_one_error_line_with_cause_and_fix(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsAtOffsetThree")

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 1
    [line] = _error_lines(result.stderr)
    assert line == (
        f"Error: task Partition 0: process() raised for the message at stream 'kafka.{topic_name}-in' "
        "partition 0 offset 3: ValueError: no price for 'item-3' (at failing_tasks.py:16 in process); "
        "the job stopped after committing "
        "every message before it. Fix the task (run with -v for the traceback), or go on past such "
        "messages: task.ignored.exceptions=ValueError skips them, task.dead.letter.stream=kafka.<stream> "
        "keeps them aside"
    )
    assert "Traceback" not in result.stderr and CHAIN not in result.stderr
    assert result.stderr.rstrip().endswith(line)  # the last word, after the container's summary


def test_with_v_the_traceback_is_shown_and_the_log_file_always_has_it(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsAtOffsetThree")
    log_file = tmp_path / "job.log"

    verbose = _samzapy("-v", "run", str(config), "--exit-at-end")
    quiet = _samzapy("--log-file", str(log_file), "run", str(config), "--exit-at-end")

    assert verbose.returncode == 1 and len(_error_lines(verbose.stderr)) == 1
    assert "Traceback (most recent call last)" in verbose.stderr
    assert 'failing_tasks.py", line 16, in process' in verbose.stderr  # the task's own line
    assert quiet.returncode == 1 and "Traceback" not in quiet.stderr
    written = log_file.read_text()
    assert "the command failed: task Partition 0: process() raised" in written
    assert 'failing_tasks.py", line 16, in process' in written


def test_a_failing_init_names_the_exception_and_where_it_was_raised(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsInInit")

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 1
    assert _error_lines(result.stderr) == [
        "Error: task Partition 0: init() raised RuntimeError: the price table did not load "
        "(at failing_tasks.py:23 in init). Fix the task (run with -v for the traceback)"
    ]
    assert "Traceback" not in result.stderr and CHAIN not in result.stderr


def test_a_failing_tool_prints_one_error_line_too(tmp_path):
    config = write_config(
        tmp_path / "job.properties",
        {
            "job.name": "t",
            "task.class": "tools_tasks:KeyValueTask",
            "task.inputs": "kafka.in",
            "stores.s.factory": "rocksdb",
            "stores.s.key.serde": "string",
            "stores.s.msg.serde": "string",
        },
    )
    db = Rdict(str(tmp_path / "s" / "Partition_0"), options=Options(raw_mode=True))
    db.put(b"k", b"v")
    db.close()
    [manifest] = (tmp_path / "s" / "Partition_0").glob("MANIFEST-*")
    manifest.unlink()
    tool = shutil.which("read-rocksdb-tool", path=str(Path(sys.executable).parent))
    assert tool is not None

    result = subprocess.run(
        [tool, "scan", "--config-path", str(config), "--db-path", str(tmp_path), "--db-name", "s"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: store 's' at ")
    assert "is missing" in result.stderr and "Traceback" not in result.stderr


def test_a_failing_window_names_the_task_and_the_users_line(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsInWindow")

    result = _samzapy("run", str(config), "--exit-at-end", "--config", "task.window.ms=1")

    assert result.returncode == 1
    assert _error_lines(result.stderr) == [
        "Error: task Partition 0: window() raised ZeroDivisionError: division by zero "
        "(at failing_tasks.py:39 in _rate). Fix the task (run with -v for the traceback)"
    ]
    assert "Traceback" not in result.stderr


def test_with_v_the_users_traceback_comes_before_the_stop_summary(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsAtOffsetThree")

    verbose = _samzapy("-v", "run", str(config), "--exit-at-end")

    assert verbose.returncode == 1
    own = verbose.stderr.index(
        f"process() raised for the message at stream 'kafka.{topic_name}-in' partition 0 offset 3: "
        "ValueError: no price for 'item-3' (at failing_tasks.py:16 in process):\n"
        "Traceback (most recent call last):\n"
        '  File "'
    )
    users = verbose.stderr[own:].split("\n")[2:6]
    assert users[0].endswith('failing_tasks.py", line 16, in process')  # no container frame first
    assert "run_loop: stopped: " in verbose.stderr[own:], verbose.stderr[own:]


def test_log_format_json_lines_parse_and_carry_the_failure(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsAtOffsetThree")

    result = _samzapy("--log-format", "json", "run", str(config), "--exit-at-end")

    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]  # every JSON-looking line parses
    assert len(records) >= 5 and {"time", "level", "logger", "thread", "message"} <= set(records[0])
    assert any(r["logger"].startswith("samzapy.container") for r in records), [r["logger"] for r in records]
    assert any(r["level"] == "ERROR" and "process() raised" in r["message"] for r in records)
    others = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert others == _error_lines(result.stderr)  # only the one Error: line is not JSON


def test_log_config_replaces_the_console_set_up(tmp_path, broker, topic_name):
    config = _config(tmp_path, broker, topic_name, "FailsAtOffsetThree")
    written = tmp_path / "samzapy.log"
    log_config = tmp_path / "logging.ini"
    log_config.write_text(
        "[loggers]\nkeys=root\n\n[handlers]\nkeys=file\n\n[formatters]\nkeys=plain\n\n"
        "[logger_root]\nlevel=INFO\nhandlers=file\n\n"
        f"[handler_file]\nclass=FileHandler\nformatter=plain\nargs=('{written}',)\n\n"
        "[formatter_plain]\nformat=CUSTOM %(levelname)s %(name)s %(message)s\n"
    )

    result = _samzapy("--log-config", str(log_config), "run", str(config), "--exit-at-end")

    assert result.returncode == 1
    lines = written.read_text().splitlines()
    assert lines[0].startswith("CUSTOM INFO ") and sum(line.startswith("CUSTOM ") for line in lines) >= 5
    assert not [line for line in lines if line[:4].isdigit()]  # none in samzapy's own format
    assert any(
        line.startswith("CUSTOM ERROR samzapy.cli the command failed: task Partition 0") for line in lines
    )
    assert "INFO" not in result.stderr  # the console set-up is the file's, not samzapy's

    broken = tmp_path / "broken.ini"
    broken.write_text("[loggers]\nkeys=root\n")
    bad = _samzapy("--log-config", str(broken), "run", str(config), "--exit-at-end")
    assert bad.returncode == 2 and "broken.ini is not a usable logging configuration" in bad.stderr

"""``samzapy init NAME`` (and ``--pipeline``) writes a project that passes its own test and runs
on the embedded broker exactly as its README says, from a fresh directory (issue 31 item 3)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import loud_lines

from samzapy.kafka import broker as dev_broker

pytestmark = pytest.mark.integration


def _env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SAMZAPY_HOME"] = str(scratch / "home")
    env["SAMZAPY_BROKER_PORT"] = str(dev_broker.free_port())
    env.pop("PYTHONPATH", None)
    return env


def _sh(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-e", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_an_init_project_passes_its_test_and_runs_as_its_readme_says(tmp_path):
    env = _env(tmp_path)
    made = _sh("samzapy init page-tally", tmp_path, env)
    project = tmp_path / "page-tally"
    assert sorted(p.name for p in project.iterdir()) == [
        "README.md",
        "conftest.py",
        "page-tally.properties",
        "page_tally.py",
        "sample-input.jsonl",
        "test_page_tally.py",
    ]
    assert "next: cd page-tally && python -m pytest -q" in made.stdout
    readme = (project / "README.md").read_text()
    test_block, run_block = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    try:
        tested = _sh(test_block.strip() + " -p no:cacheprovider", project, env)
        assert re.search(r"^2 passed in ", tested.stdout, re.MULTILINE), tested.stdout
        assert "warning" not in tested.stdout.lower()  # no flood of our dependencies' warnings

        lines = [line for line in run_block.splitlines() if line.strip()]
        outputs = [_sh(line, project, env) for line in lines]

        assert [loud_lines(o.stdout + o.stderr) for o in outputs] == [[], [], []]  # a clean run is quiet
        assert outputs[-1].stdout.splitlines() == [
            '0:0\tann\t{"user":"ann","count":1}',
            '0:1\tbob\t{"user":"bob","count":1}',
            '0:2\tann\t{"user":"ann","count":2}',
            '0:3\tann\t{"user":"ann","count":3}',
            '1:0\tcyd\t{"user":"cyd","count":1}',
        ]
    finally:
        dev_broker.stop(tmp_path / "home" / "broker")


def test_an_init_pipeline_project_passes_its_test_and_runs_as_its_readme_says(tmp_path):
    env = _env(tmp_path)
    _sh("samzapy init page-tally --pipeline", tmp_path, env)
    project = tmp_path / "page-tally"
    assert sorted(p.name for p in project.iterdir()) == [
        "README.md",
        "app.py",
        "conftest.py",
        "sample-input.jsonl",
        "test_page_tally.py",
    ]
    test_block, run_block = re.findall(r"```sh\n(.*?)```", (project / "README.md").read_text(), re.DOTALL)
    try:
        tested = _sh(test_block.strip() + " -p no:cacheprovider", project, env)
        assert re.search(r"^2 passed in ", tested.stdout, re.MULTILINE), tested.stdout
        assert "warning" not in tested.stdout.lower()
        outputs = [_sh(line, project, env) for line in run_block.splitlines() if line.strip()]
        assert [loud_lines(o.stdout + o.stderr) for o in outputs] == [[], [], [], []]
        assert outputs[-1].stdout.splitlines() == [  # per user and minute of "ts"; /health filtered
            '0:0\tann\t{"key":"ann","start":0,"end":60000,"value":2}',
            '0:1\tbob\t{"key":"bob","start":0,"end":60000,"value":1}',
            '0:2\tann\t{"key":"ann","start":60000,"end":120000,"value":1}',
            '1:0\tcyd\t{"key":"cyd","start":0,"end":60000,"value":1}',
        ]
    finally:
        dev_broker.stop(tmp_path / "home" / "broker")


def test_init_refuses_a_name_that_would_hide_a_module_and_a_used_directory(tmp_path):
    env = _env(tmp_path)
    hidden = subprocess.run(
        [sys.executable, "-m", "samzapy", "init", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert hidden.returncode == 2
    assert "'json' would make a module 'json' hiding Python's or samzapy's own" in hidden.stderr
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    used = subprocess.run(
        [sys.executable, "-m", "samzapy", "init", "busy"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert used.returncode == 2 and "busy already exists and is not empty" in used.stderr

"""A wheel install runs ``samzapy quickstart`` (issue 16 item 7): config/ ships in the wheel.

Builds the wheel from this checkout, installs it with its dependencies (and the ``broker``
extra) into a fresh venv from the configured package index, and runs the quickstart from a
directory that is not the checkout, so nothing of the source tree can stand in for the wheel.
Takes ~45 s (most of it pip): marked ``install`` as well as ``integration``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

_NOT_SOURCE = (
    ".venv",
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "state",
    "results",
    ".peers",
    ".samzapy",
)

pytestmark = [pytest.mark.integration, pytest.mark.install]


def _run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_a_wheel_install_runs_the_quickstart(tmp_path: Path) -> None:
    # A copy of the sources: pip builds in the tree, and a build/ left in the checkout would both
    # litter it and leak stale modules into later wheels.
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", source, cwd=tmp_path
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("samzapy-*.whl")

    base_python = getattr(sys, "_base_executable", sys.executable)
    venv = tmp_path / "venv"
    made = _run(base_python, "-m", "venv", venv, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    installed = _run(venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[broker]", cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]

    where = _run(venv / "bin" / "python", "-c", "import samzapy; print(samzapy.__file__)", cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout  # the wheel, not this checkout

    result = _run(venv / "bin" / "samzapy", "quickstart", "--count", "2000", "--users", "10", "--hours", "1",
                  cwd=tmp_path, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2000 of 2000 generated: every view accounted for" in result.stdout

    # the examples the docs name, and samzapy init's templates, are in the wheel too (issue 31)
    listed = _run(venv / "bin" / "samzapy", "examples", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert f"config: {venv}" in listed.stdout and "pageview_counter.py (PageViewCounterTask)" in listed.stdout
    made = _run(venv / "bin" / "samzapy", "init", "from-wheel", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    assert (tmp_path / "from-wheel" / "from_wheel.py").is_file()

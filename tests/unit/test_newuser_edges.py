"""Rough edges a new user met on a fresh clone, following the README and docs alone (issues
29 and 31): each test is what the user did, and what they should have seen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_a_pipeline_test_without_the_plugin_shows_no_dependency_warnings(tmp_path):
    # A user's first pipeline test, run with plain pytest (no conftest.py): importing
    # samzapy.pipeline imports kafka-python, whose ~200 DeprecationWarnings buried the summary.
    (tmp_path / "test_upper.py").write_text(
        "import samzapy\n"
        "from samzapy.pipeline.testing import PipelineHarness\n\n"
        "def test_upper():\n"
        "    app = samzapy.App('upper')\n"
        "    app.stream('words').map(str.upper).to('upper')\n"
        "    with PipelineHarness(app) as h:\n"
        "        h.send('words', 'a', 'x')\n"
        "        assert h.outputs('upper') == [('a', 'X')]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_upper.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout.lower(), done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("1 passed"), done.stdout

"""The benchmark suite runs end to end at its tiny size: prints the table, writes the JSON.

Figures are not checked (benchmarks are not timed tests); the peers and Spark are left out
(their venvs and start-up would not fit a smoke run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_suite_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--size", "tiny", "--only", "store,restore", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| benchmark" in done.stdout
    assert "samzapy sequential restore" in done.stdout
    data = json.loads(out.read_text())
    assert data["machine"]["cpus"] >= 1
    names = [r["name"] for r in data["results"]]
    assert names == ["store", "restore"]
    for result in data["results"]:
        assert result["rows"], result
        assert result["peak_rss_mb"] > 0
        for row in result["rows"]:
            assert row["value"] > 0
            assert row["ratio"] is None or row["ratio"] > 0

"""The README's first command: ``samzapy quickstart`` runs the page-view counter end to end."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from support import loud_lines

pytestmark = pytest.mark.integration


def test_quickstart_counts_every_generated_view_once():
    result = subprocess.run(
        [sys.executable, "-m", "samzapy", "quickstart", "--count", "3000", "--users", "20", "--hours", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert loud_lines(result.stdout + result.stderr) == []  # a clean run is quiet (issue 31)
    summary = re.search(
        r"(\d+) views counted \+ (\d+) too late .* = (\d+) of (\d+) generated: (.*)$",
        result.stdout,
        re.MULTILINE,
    )
    assert summary, result.stdout
    counted, late, total, generated, verdict = summary.groups()
    assert int(counted) + int(late) == int(total) == int(generated) == 3000
    assert verdict == "every view accounted for"
    assert int(late) > 0  # the generator makes 1% of views two hours late
    hours = re.findall(
        r"^\d{4}-\d\d-\d\d \d\d:00-\d\d:00 UTC +(\d+) views  top: ", result.stdout, re.MULTILINE
    )
    assert sum(map(int, hours)) == int(counted)

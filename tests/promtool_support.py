"""promtool (Debian's ``prometheus`` package) as the judge of a ``/metrics`` page: it knows
Prometheus's naming rules (``_total`` on counters, ``_count``/``_sum``/``_bucket`` kept for
histograms and summaries, base units) better than any list we would keep ourselves.

Without promtool a test skips on a developer's machine and fails in CI (``CI=true``), where
``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def promtool_problems(page: str) -> list[str]:
    """What ``promtool check metrics`` says is wrong with ``page`` (empty: nothing)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing: .ci/run installs Debian's prometheus package")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    result = subprocess.run(
        [promtool, "check", "metrics"], input=page, capture_output=True, text=True, timeout=60, check=False
    )
    problems = (result.stdout + result.stderr).splitlines()
    if result.returncode != 0 and not problems:
        problems = [f"promtool exited {result.returncode} without saying why"]
    return problems

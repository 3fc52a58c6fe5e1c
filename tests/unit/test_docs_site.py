"""The documentation site (mkdocs.yml) builds in strict mode: a broken link, a page missing
from the nav, a docstring mkdocstrings cannot read or a reference to nothing fails it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

pytest.importorskip("mkdocstrings", reason="the docs extra: pip install -e '.[docs]'")


def test_the_docs_site_builds_in_strict_mode(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reference = tmp_path / "site" / "reference"
    testing = (reference / "testing" / "index.html").read_text()
    assert "restore_stores" in testing
    assert "KeyValueStore" in (reference / "stores" / "index.html").read_text()
    # the docstrings' Sphinx roles are shown as code (.ci/griffe_sphinx_roles.py), not as typed
    context = (reference / "context" / "index.html").read_text()
    assert ":class:" not in context and "<code>AppConfig</code>" in context

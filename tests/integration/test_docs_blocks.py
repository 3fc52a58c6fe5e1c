"""The README's and docs' code blocks run verbatim (issue 16 items 1 and 8).

The marker convention is in ``tests/docblocks.py``. Each document runs in its own scratch
directory (with a ``config`` link to the repository's ready job files), with this venv's
``bin`` first on PATH and its own embedded dev broker (``SAMZAPY_HOME`` and
``SAMZAPY_BROKER_PORT`` point into the scratch directory), stopped afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docblocks import ROOT, Block, blocks, documents, marker_problems

from samzapy.kafka import broker as dev_broker

pytestmark = pytest.mark.integration

BLOCK_TIMEOUT_S = 300


def test_every_block_carries_a_marker() -> None:
    problems = [p for doc in documents() for block in blocks(doc) for p in marker_problems(block)]
    assert problems == []


def _runnable() -> list[Path]:
    return [doc for doc in documents() if any(b.kind == "run" for b in blocks(doc))]


def _env(scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SAMZAPY_HOME"] = str(scratch / "home")
    env["SAMZAPY_BROKER_PORT"] = str(dev_broker.free_port())
    env.pop("PYTHONPATH", None)
    return env


def _run(block: Block, scratch: Path, env: dict[str, str]) -> str:
    if block.info == "python":
        command = [sys.executable, "-c", block.text]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    result = subprocess.run(
        command, cwd=scratch, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, (
        f"{block.where} exited {result.returncode}\n--- block\n{block.text}--- stdout\n"
        f"{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-5000:]}"
    )
    return result.stdout


@pytest.mark.parametrize("doc", _runnable(), ids=lambda d: str(d.relative_to(ROOT)))
def test_the_blocks_of_a_document_run_verbatim(doc: Path, tmp_path: Path) -> None:
    (tmp_path / "config").symlink_to(ROOT / "config")
    env = _env(tmp_path)
    printed: str | None = None
    try:
        for block in blocks(doc):
            if block.kind == "file":
                path = tmp_path / block.arg
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block.text)
            elif block.kind == "run":
                printed = _run(block, tmp_path, env)
            elif block.kind == "stdout":
                assert printed == block.text, f"{block.where}: the run block before it printed\n{printed}"
    finally:
        dev_broker.stop(tmp_path / "home" / "broker")

"""The peers (Quix Streams, Faust), each in a virtualenv of its own under ``benchmarks/.peers``.

A peer's venv is created on first use with the Python running this module and
``pip install``s the peer from the package index (Quix Streams brings confluent-kafka, whose
wheels carry librdkafka). samzapy's own environment is never touched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent / ".peers"
#: peer name -> the pip requirements of its venv
REQUIREMENTS = {
    "quix": ["quixstreams"],
    "faust": ["faust-streaming", "rocksdict"],
}


def python_of(peer: str) -> Path:
    """The Python of ``peer``'s venv, creating the venv and installing the peer if needed.

    Raises:
        RuntimeError: the venv could not be made or the install failed (pip's last lines).
    """
    venv = PEERS_DIR / peer
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return python
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", *REQUIREMENTS[peer]],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            msg = f"cannot set up the {peer} peer ({' '.join(step[:4])}...): {tail}"
            raise RuntimeError(msg)
    marker.write_text(" ".join(REQUIREMENTS[peer]) + "\n")
    return python

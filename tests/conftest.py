"""Shared fixtures: one real dev broker (Tansu) per test session on a free port."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from samzapy.kafka import broker as dev_broker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bootstrap address of a dev broker started for this test session and stopped after."""
    state_dir: Path = tmp_path_factory.mktemp("broker")
    info = dev_broker.start(port=dev_broker.free_port(), state_dir=state_dir)
    os.environ["SAMZAPY_BROKER_PORT"] = str(info.port)
    try:
        yield info.bootstrap_servers
    finally:
        dev_broker.stop(state_dir)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (the broker is shared by the whole session)."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"{base}-{os.getpid()}-{id(request.node) % 100000}"


# Test-support helpers live in tests/support.py; make them importable without a package.
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

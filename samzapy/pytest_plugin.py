"""A pytest fixture for testing tasks with :class:`samzapy.testing.TaskHarness`.

Enable it in your ``conftest.py``::

    pytest_plugins = ["samzapy.pytest_plugin"]

then ask for ``task_harness`` in a test: it builds harnesses and closes them (their stores and
temporary directories) when the test ends, passed or failed::

    def test_counts(task_harness):
        h = task_harness(MyTask, "my-job.properties")
        h.send("kafka.clicks", "ann", {"user": "ann"})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from samzapy.config import Config, load_config

if TYPE_CHECKING:
    # imported when the fixture is first used, not with the plugin: pytest loads plugins before
    # the filters of pytest_configure below apply, and the harness imports kafka-python
    from samzapy.testing import TaskHarness

#: ``task_harness(task, config=None, **kwargs)``: ``config`` is a dict of properties, a
#: :class:`~samzapy.config.Config`, or the path of a ``.properties`` file.
HarnessFactory = Callable[..., "TaskHarness"]
_ConfigLike = dict[str, str] | Config | str | Path | None


#: Warnings of samzapy's dependencies, not of the code under test: kafka-python 3.0 reads its
#: protocol schemas with importlib.resources calls deprecated since Python 3.11, about 200 of
#: them at its first import, which would bury a user's own test summary.
DEPENDENCY_WARNINGS = (
    "ignore:read_text is deprecated:DeprecationWarning",
    "ignore:open_text is deprecated:DeprecationWarning",
)


def pytest_configure(config: pytest.Config) -> None:
    """Silence :data:`DEPENDENCY_WARNINGS` in the test run that enabled this plugin."""
    for line in DEPENDENCY_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


@pytest.fixture
def task_harness() -> Iterator[HarnessFactory]:
    """A factory of :class:`TaskHarness` objects, all closed at the end of the test."""
    from samzapy.testing import TaskHarness

    made: list[TaskHarness] = []

    def make(task: Any, config: _ConfigLike = None, **kwargs: Any) -> TaskHarness:
        if isinstance(config, str | Path):
            config = load_config(config)
        harness = TaskHarness(task, config, **kwargs)
        made.append(harness)
        return harness

    yield make
    for harness in reversed(made):
        harness.close()

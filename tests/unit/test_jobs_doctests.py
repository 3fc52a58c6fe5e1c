"""Run the doctests of the jobs' modules."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["ad_click_join"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(f"samzapy.jobs.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0

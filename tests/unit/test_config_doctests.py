"""The doctests of samzapy.config (properties parsing, value types, the catalogue, the view)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "samzapy.config.app",
    "samzapy.config.keys",
    "samzapy.config.properties",
    "samzapy.config.types",
    "samzapy.config.user_code",
]


@pytest.mark.parametrize("name", MODULES)
def test_the_doctests_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0

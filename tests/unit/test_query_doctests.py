"""The examples in the query modules' docstrings run (pytest does not collect doctests here)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import samzapy.query

MODULES = [m.name for m in pkgutil.iter_modules(samzapy.query.__path__, "samzapy.query.")]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0

"""The examples in the operators' docstrings, and in the output-id scheme they use, run
(pytest does not collect doctests here)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import samzapy.operators

MODULES = [
    *(m.name for m in pkgutil.iter_modules(samzapy.operators.__path__, "samzapy.operators.")),
    "samzapy.output_ids",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0

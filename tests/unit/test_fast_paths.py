"""The fast paths say whether they are on and why not (issue 14 item 5)."""

from __future__ import annotations

import logging
import sys

import kafka
import pytest

from samzapy.kafka import FastPath, fast_paths
from samzapy.kafka import fast_path_state as fast_paths_module


def test_both_fast_paths_are_on_with_the_pinned_clients() -> None:
    states = fast_paths()
    assert [s.name for s in states] == ["producer-append", "consumer-decode"]
    assert all(s.active for s in states), [s.describe() for s in states]
    assert states[0].reason == (
        f"kafka-python {kafka.__version__}: records appended to its accumulator directly, "
        "batches built by aiokafka's C builder"
    )
    assert "aiokafka 0.14" in states[1].reason


def test_the_c_builder_switched_off_is_said_in_the_producer_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMZAPY_PRODUCER_C_BUILDER", "0")
    append, _ = fast_paths()
    assert append.active
    assert append.reason.endswith(
        "; batches built in Python (C builder off: switched off by SAMZAPY_PRODUCER_C_BUILDER=0)"
    )


def test_another_kafka_python_turns_both_off_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "__version__", "3.1.0")
    append, decode = fast_paths()
    assert not append.active and not decode.active
    for state in (append, decode):
        assert state.reason.startswith("kafka-python 3.1.0 is not a version it was checked against (3.0.x)")
        assert "pyproject.toml pins" in state.reason


def test_a_decoder_that_does_not_import_is_off_not_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # kafka-python 2.2/2.3 lack the Fetcher internals fast_decode imports; samzapy must still
    # import (samzapy --help used to fail) and say why the decoder is off.
    monkeypatch.setitem(sys.modules, "samzapy.kafka.fast_decode", None)
    decode = fast_paths()[1]
    assert decode == FastPath(
        "consumer-decode",
        False,
        "kafka-python internals it needs do not import (ModuleNotFoundError: import of "
        "samzapy.kafka.fast_decode halted; None in sys.modules): install the kafka-python range "
        "pyproject.toml pins",
    )
    assert fast_paths_module.install_decoder(object()) is False  # consumers keep kafka-python's


def test_the_state_is_logged_once_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fast_paths_module, "_logged", False)
    monkeypatch.setenv("SAMZAPY_PRODUCER_FAST_PATH", "0")
    with caplog.at_level(logging.DEBUG, logger="samzapy.kafka.fast_path_state"):
        fast_paths_module.log_fast_paths()
        fast_paths_module.log_fast_paths()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0] == "fast path producer-append: OFF (switched off by SAMZAPY_PRODUCER_FAST_PATH=0)"
    assert lines[1].startswith("fast path consumer-decode: on (kafka-python ")
    # the path that is off says so on the console (INFO); the one that is on only at DEBUG
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.DEBUG]

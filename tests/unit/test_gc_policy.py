"""``samzapy run``'s collector settings (samzapy/container/gc_policy.py), and the opt-out."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from samzapy.container.gc_policy import OLDER_THRESHOLDS, YOUNG_THRESHOLD, apply_run_policy


@pytest.fixture(autouse=True)
def python_settings_after() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_the_run_policy_freezes_the_start_up_heap_and_raises_the_thresholds(monkeypatch) -> None:
    monkeypatch.delenv("SAMZAPY_GC", raising=False)
    assert apply_run_policy()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    assert gc.get_freeze_count() > 0


def test_samzapy_gc_python_keeps_pythons_settings(monkeypatch) -> None:
    monkeypatch.setenv("SAMZAPY_GC", "python")
    before = gc.get_threshold()
    assert not apply_run_policy()
    assert gc.get_threshold() == before

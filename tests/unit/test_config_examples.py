"""Every ready job file in config/ parses with its user code imported, as `samzapy run` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import load_config, parse_job_config
from samzapy.task import StreamTask

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
FILES = sorted(CONFIG_DIR.glob("*.properties"))


def test_there_are_example_files() -> None:
    assert len(FILES) >= 8


@pytest.mark.parametrize("file", FILES, ids=[f.name for f in FILES])
def test_example_parses_with_its_task_class_and_processors_imported(file: Path) -> None:
    job = parse_job_config(load_config(file), check_task_class=True)
    assert issubclass(job.task_type, StreamTask) and job.task_type is not StreamTask
    assert job.inputs
    for store in job.stores.values():
        if store.side_inputs_processor:
            assert callable(store.processor), store.name

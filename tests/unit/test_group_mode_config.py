"""What group mode refuses is found by the config pass, with file:line, before anything
connects; what the task manager made possible (async tasks, side inputs, flush.at.head) passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import load_config, parse_job_config
from samzapy.errors import ConfigError

BASE = """job.name=j
job.coordinator.factory=group
task.class=samzapy:StreamTask
task.inputs=kafka.in
stores.counts.factory=rocksdb
stores.counts.changelog=kafka.counts-changelog
"""


def parse(tmp_path: Path, extra: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "job.properties"
    path.write_text(BASE + extra)
    return path, parse_job_config(load_config(str(path), ()))


def test_group_mode_refuses_the_spark_restore_engine_naming_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        parse(tmp_path, "stores.counts.restore.engine=spark\n")

    path = tmp_path / "job.properties"
    assert f"Invalid value 'spark' for 'stores.counts.restore.engine' ({path}:7): " in str(error.value)
    assert "job.coordinator.factory=passthrough" in str(error.value)


def test_group_mode_takes_flush_at_head_side_inputs_and_the_sequential_restore(tmp_path: Path) -> None:
    _, job = parse(
        tmp_path,
        "stores.counts.flush.at.head=true\nstores.counts.restore.engine=sequential\n"
        "stores.table.factory=rocksdb\nstores.table.side.inputs=kafka.profiles\n",
    )

    assert job.coordinator == "group" and job.stores["counts"].flush_at_head
    assert job.stores["table"].has_side_inputs

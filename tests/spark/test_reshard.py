"""Reshard a stateful counter mid-stream on the dev broker, 4 -> 8 -> 3 tasks: stop at the end,
change the input's partitions, reshard, produce more, run: exact counts, and every key only in
the task that owns it under the new count."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from state_support import (
    changelog_state,
    counting_config,
    last_counts,
    produce_views,
    recreate,
    restored,
    run_counting,
    views,
)
from support import read_store

from samzapy.checkpoint import read_checkpoints
from samzapy.config import load_config, parse_job_config
from samzapy.kafka.partitioner import partition_for_key
from samzapy.tools.state_storage import main as state_storage_tool

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def assert_placed(tmp_path: Path, broker: str, name: str, tasks: int, counts: dict) -> None:
    """Every key lives in exactly its task's store and changelog partition; no other task."""
    stores = sorted(
        p.name for p in (tmp_path / name / "counts").iterdir() if not p.name.endswith(".checkpoints")
    )
    assert stores == sorted(f"Partition_{p}" for p in range(tasks))
    for partition in range(tasks):
        local = read_store(tmp_path / name, "counts", value_decode=int, partitions=[partition])
        assert local == {u: n for u, n in counts.items() if partition_for_key(u.encode(), tasks) == partition}
    changelog = changelog_state(broker, f"{name}-changelog")
    assert sorted(changelog) == [p for p in range(tasks) if changelog.get(p)]
    for partition, kv in changelog.items():
        assert all(partition_for_key(u.encode(), tasks) == partition for u in kv)
    assert {u: n for kv in changelog.values() for u, n in kv.items()} == counts


def test_reshard_4_to_8_to_3_keeps_exact_counts_and_leaves_no_key_behind(tmp_path, broker, spark):
    name = f"reshard-{tmp_path.name[-12:]}"
    source = f"{name}-in"
    config = counting_config(tmp_path, broker, name, source)
    job = parse_job_config(load_config(config))
    counts = produce_views(broker, source, 4, views(500, 40, seed=1))
    run_counting(config, tmp_path / "m1.json")

    for tasks, more in ((8, views(300, 50, seed=2)), (3, views(300, 50, seed=3))):
        recreate(broker, source, tasks)
        args = ["reshard", "--config-path", str(config), "--partitions", str(tasks)]
        result = CliRunner().invoke(state_storage_tool, args)
        assert result.exit_code == 0, result.output
        assert f"-> {tasks} tasks: {len(counts)} keys" in result.output
        assert re.search(
            r"reshard read: [\d,]+/[\d,]+ records \(\d+%\), [\d.]+ MB, [\d,]+ records/s", result.output
        )

        assert_placed(tmp_path, broker, name, tasks, dict(counts))
        checkpoints = read_checkpoints(broker, job.checkpoint_topic)
        assert sorted(checkpoints) == sorted(f"Partition {p}" for p in range(tasks))

        counts.update(produce_views(broker, source, tasks, more))
        snapshot = run_counting(config, tmp_path / f"m{tasks}.json")
        assert restored(snapshot) == 0  # the resharded stores were adopted as they are
        assert last_counts(broker, f"{name}-out") == dict(counts)
        assert_placed(tmp_path, broker, name, tasks, dict(counts))

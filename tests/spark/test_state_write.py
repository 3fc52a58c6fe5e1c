"""write_state round trip on the dev broker: read a job's state, write it into a fresh job, and
the fresh job starts without replaying its changelog and counts on exactly."""

from __future__ import annotations

import pytest
from state_support import (
    PARTITIONS,
    changelog_state,
    counting_config,
    last_counts,
    produce_views,
    restored,
    run_counting,
    views,
)
from support import create_topic, read_store

from samzapy.spark.state_data.read import read_state
from samzapy.spark.state_data.write import write_state

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_state_read_then_written_into_a_fresh_job_is_adopted_without_replay(tmp_path, broker, spark):
    tag = tmp_path.name[-12:]
    old, new = f"ws-old-{tag}", f"ws-new-{tag}"
    create_topic(broker, f"{new}-in", PARTITIONS)
    counts = produce_views(broker, f"{old}-in", PARTITIONS, views(600, 30, seed=1))
    old_config = counting_config(tmp_path, broker, old, f"{old}-in")
    new_config = counting_config(tmp_path, broker, new, f"{new}-in")
    run_counting(old_config, tmp_path / "old-metrics.json")

    frame = read_state(spark, old_config, "counts").select("key", "value")
    stats = write_state(frame, new_config, "counts")

    assert stats.keys == len(counts) == 30
    assert changelog_state(broker, f"{new}-changelog") == changelog_state(broker, f"{old}-changelog")
    old_stores = read_store(tmp_path / old, "counts")
    assert read_store(tmp_path / new, "counts") == old_stores

    more = produce_views(broker, f"{new}-in", PARTITIONS, views(300, 40, seed=2))
    counts.update(more)
    snapshot = run_counting(new_config, tmp_path / "new-metrics.json")

    assert restored(snapshot) == 0  # the written stores and checkpoints were adopted as they are
    assert last_counts(broker, f"{new}-out") == {u: counts[u] for u in more}  # counted on exactly
    final = changelog_state(broker, f"{new}-changelog")
    assert {u: n for kv in final.values() for u, n in kv.items()} == dict(counts)
    assert read_store(tmp_path / new, "counts", value_decode=int) == dict(counts)

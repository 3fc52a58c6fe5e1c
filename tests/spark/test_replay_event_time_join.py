"""Spark replay of the event-time stream-table join gives the streaming outputs (by samzapy.id,
partition, key and bytes) and stores, although streaming read the views before any profile."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_replay_patterns import diff, replayed, state_dir, stores, streamed

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from test_jobs_event_time_join import views_first  # noqa: E402

from samzapy.spark.replay.driver import replay  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_replay_of_the_event_time_join_equals_a_streaming_run_that_saw_views_first(tmp_path, broker, spark):
    config, topics = views_first(tmp_path, broker, "etj-replay")
    out = tmp_path / "replay"
    replay(config, output=str(out))
    want = streamed(broker, topics["enriched"])
    assert sum(want.values()) > 2_000
    problems = diff("enriched", want, replayed(out, topics["enriched"]))
    problems += diff("stores", stores(config, state_dir(config)), stores(config, out / "state"))
    assert not problems, "\n".join(problems)

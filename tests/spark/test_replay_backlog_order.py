"""Streaming over a backlog == its Spark replay, for the table-table join with interleaved
histories (issue 29 item 4; docs/operations.md, "What a replay reproduces").

The whole history is produced before the streaming job starts, in four alternating phases
(profiles, settings, profiles, settings) whose record timestamps interleave record by record
and tie across the two streams, so the order the job's polls return the backlog in is far
from timestamp order. The job runs once (``--exit-at-end``) with the default
``task.input.order=timestamp``; a file-mode replay of the same input must give the same
change records (``samzapy.id``, partition, key, value bytes) and the same final stores.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import orjson
import pytest
from support import create_topic
from test_replay_patterns import compare_job

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from jobs_support import job_config, run_to_end  # noqa: E402

from samzapy.generate import profiles, settings  # noqa: E402
from samzapy.kafka.producer import Producer  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 2
T0 = 1_700_000_000_000


def produce_stamped(broker: str, topic: str, records: list[tuple[bytes, dict | None, int]]) -> None:
    """JSON records with the given timestamps, partitioned by key."""
    producer = Producer(broker)
    try:
        for key, value, stamp in records:
            producer.send(topic, key, None if value is None else orjson.dumps(value), timestamp_ms=stamp)
        producer.flush()
    finally:
        producer.close()


def test_streaming_over_a_backlog_gives_the_replays_table_table_changes(tmp_path, broker, spark, capsys):
    topics = {n: f"{n}-tt-backlog" for n in ("profiles", "settings", "changes", "table")}
    for name in ("profiles", "settings"):
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "profile-settings-join.properties",
        "tt-backlog",
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['settings']}",
            "join.left.stream": topics["profiles"],
            "join.right.stream": topics["settings"],
            "join.output.stream": f"kafka.{topics['changes']}",
            "stores.joined.changelog": f"kafka.{topics['table']}",
        },
    )
    rng = random.Random(29)
    # Record i of either stream at about T0 + 10 i: the two interleave, some at the same ms.
    left = [
        (k, v, T0 + 10 * i + rng.choice((0, 0, 3))) for i, (k, v) in enumerate(profiles(600, 60, seed=41))
    ]
    right = [
        (k, v, T0 + 10 * i + rng.choice((0, 3, 7))) for i, (k, v) in enumerate(settings(600, 60, seed=42))
    ]
    for topic, records in (
        (topics["profiles"], left[:300]),
        (topics["settings"], right[:300]),
        (topics["profiles"], left[300:]),
        (topics["settings"], right[300:]),
    ):
        produce_stamped(broker, topic, records)
    run_to_end(config)  # one run over the whole backlog
    problems: list[str] = []
    sizes = compare_job(
        config, tmp_path / "replay", broker, [topics["changes"]], problems, "table-table backlog"
    )
    with capsys.disabled():
        print(f"\ntable-table join over a backlog: {sizes}")
    assert not problems, "\n".join(problems)

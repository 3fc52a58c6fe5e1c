"""task.input.order=timestamp in a real container on the dev broker (issue 29 item 4).

A table-table join over a backlog of one partition per input: 8,000 profiles produced before
8,000 settings, their timestamps interleaved record by record, so the consumer returns one
input's records long before the other's and the profiles' buffer passes
``input_order.BUFFER_LIMIT`` (the partition is held out of the assignment, then comes back).
Every input record makes exactly one change record, named after it
(``tt:<stream>:<partition>:<offset>:...``), so the change topic lists the order the task took
its inputs in: it must be the Spark replay's merge of the same records, with no stall.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from support import consume_all, create_topic, header

from samzapy.container.input_order import merge_in_order
from samzapy.generate import profiles, settings
from samzapy.kafka.producer import Producer

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support

from jobs_support import job_config  # noqa: E402
from support import run_job  # noqa: E402

pytestmark = pytest.mark.integration

COUNT = 8_000
T0 = 1_700_000_000_000


def produce_stamped(broker: str, topic: str, records: list[tuple[bytes, dict | None, int]]) -> None:
    producer = Producer(broker)
    try:
        for key, value, stamp in records:
            producer.send(
                topic, key, None if value is None else orjson.dumps(value), partition=0, timestamp_ms=stamp
            )
        producer.flush()
    finally:
        producer.close()


def test_a_join_takes_a_backlog_in_the_replays_order_and_holds_back_the_input_ahead(tmp_path, broker):
    topics = {n: f"{n}-order-job" for n in ("profiles", "settings", "changes", "table")}
    for name in ("profiles", "settings"):
        create_topic(broker, topics[name], 1)
    produce_stamped(
        broker, topics["profiles"], [(k, v, T0 + 2 * i) for i, (k, v) in enumerate(profiles(COUNT, 500))]
    )
    produce_stamped(
        broker, topics["settings"], [(k, v, T0 + 2 * i) for i, (k, v) in enumerate(settings(COUNT, 500))]
    )
    config = job_config(
        tmp_path,
        broker,
        "profile-settings-join.properties",
        "order-job",
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['settings']}",
            "join.left.stream": topics["profiles"],
            "join.right.stream": topics["settings"],
            "join.output.stream": f"kafka.{topics['changes']}",
            "stores.joined.changelog": f"kafka.{topics['table']}",
            f"systems.kafka.streams.{topics['changes']}.partitions": "1",
        },
    )
    result = run_job(config, "--exit-at-end", timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "deleted by retention?" not in result.stderr  # the stall guard never fired
    assert f"stopped: {2 * COUNT} messages processed" in result.stderr
    taken = [
        ":".join(header(r, "samzapy.id").decode().split(":")[1:4])
        for r in consume_all(broker, topics["changes"])
    ]
    inputs = [
        ((0, 0, index, 0), consume_all(broker, topics[name]))
        for index, name in enumerate(("profiles", "settings"))
    ]
    expected = [f"{r.topic}:{r.partition}:{r.offset}" for r in merge_in_order(inputs)]
    assert taken == expected

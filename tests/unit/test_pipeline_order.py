"""The in-process harness takes a backlog in the order a job takes it (issue 29 item 4).

A join pipeline's inputs sent interleaved out of timestamp order: the harness's outputs equal
those of the records delivered one by one in the Spark replay's merge order
(:func:`samzapy.container.input_order.merge_in_order`, what ``TimestampOrder`` does in a job
over a backlog), and differ from the arrival order's (``task.input.order=arrival``).
"""

from __future__ import annotations

from typing import Any

import samzapy
from samzapy.container.input_order import merge_in_order
from samzapy.pipeline.testing import PipelineHarness

PARTITIONS = 2


def _enrich_app() -> samzapy.App:
    app = samzapy.App("order-enrich")
    profiles = app.table("profiles")
    views = app.stream("views")
    views.join(profiles, lambda v, p: {**v, "zip": p and p["zip"]}, kind="left").to("enriched")
    return app


#: Views of ann and bob at 10, 20, 30 s; their profiles change at 5, 15, 25 s. Sent all views
#: first, then all profiles: in arrival order every view sees no profile.
VIEWS = [
    (u, {"user": u, "n": i}, t)
    for i, (u, t) in enumerate([("ann", 10), ("bob", 10), ("ann", 20), ("bob", 30)])
]
PROFILES = [
    ("ann", {"zip": "A5"}, 5),
    ("bob", {"zip": "B5"}, 5),
    ("ann", {"zip": "A15"}, 15),
    ("bob", {"zip": "B25"}, 25),
]


def _backlog(config: dict[str, Any] | None = None) -> tuple[PipelineHarness, list[Any]]:
    h = PipelineHarness(_enrich_app(), partitions=PARTITIONS, config=config)
    h.send_all("views", VIEWS, run=False)
    h.send_all("profiles", PROFILES, run=False)
    h.run()
    return h, h.outputs("enriched")


def _replay_order(h: PipelineHarness) -> list[tuple[str, Any, int, int]]:
    """The records of the harness's broker per task in the Spark replay's merge order, as
    ``(topic, record, partition, stream index)``."""
    inputs = [s.stream for s in h.tasks[0].job.inputs]
    ordered = []
    for p in range(PARTITIONS):
        sources = [
            ((0, 0, inputs.index(topic), p), [(topic, r) for r in h.broker.records(topic, p)])
            for topic in ("views", "profiles")
        ]
        wrapped = [(rank, [_At(topic, r) for topic, r in records]) for rank, records in sources]
        ordered.extend((a.topic, a.record, p) for a in merge_in_order(wrapped))
    return ordered


class _At:
    """A broker record with its topic, as merge_in_order reads it (timestamp, offset)."""

    def __init__(self, topic: str, record: Any) -> None:
        self.topic, self.record = topic, record
        self.timestamp, self.offset = record.timestamp, record.offset


def test_a_backlog_sent_out_of_timestamp_order_joins_as_the_replay_order() -> None:
    h, backlog = _backlog()
    with h:
        order = _replay_order(h)
        serdes = h._serdes
    # The same records, one by one (each processed as it is sent), in the replay's order.
    with PipelineHarness(_enrich_app(), partitions=PARTITIONS) as one_by_one:
        for topic, record, partition in order:
            key_serde, msg_serde = serdes.for_stream(samzapy.SystemStream("kafka", topic))
            one_by_one.send(
                topic,
                key_serde.from_bytes(record.key),
                msg_serde.from_bytes(record.value),
                timestamp=record.timestamp,
                partition=partition,
            )
        replayed = one_by_one.outputs("enriched")
    assert sorted(backlog, key=lambda kv: kv[1]["n"]) == [
        ("ann", {"user": "ann", "n": 0, "zip": "A5"}),
        ("bob", {"user": "bob", "n": 1, "zip": "B5"}),
        ("ann", {"user": "ann", "n": 2, "zip": "A15"}),
        ("bob", {"user": "bob", "n": 3, "zip": "B25"}),
    ]
    assert backlog == replayed


def test_arrival_order_takes_the_backlog_as_sent() -> None:
    h, backlog = _backlog({"task.input.order": "arrival"})
    with h:
        assert sorted((k, v["n"], v["zip"]) for k, v in backlog) == [
            ("ann", 0, None),
            ("ann", 2, None),
            ("bob", 1, None),
            ("bob", 3, None),
        ]


def test_equal_timestamps_go_by_the_stream_order_of_task_inputs() -> None:
    """A view and a profile at the same time: the tie-break is the stream's place in
    task.inputs (then partition, offset), as in a job, whatever the order they were sent in."""
    h = PipelineHarness(_enrich_app(), partitions=1)
    with h:
        inputs = [s.stream for s in h.tasks[0].job.inputs]
        h.send("views", "ann", {"user": "ann", "n": 0}, timestamp=7, run=False)
        h.send("profiles", "ann", {"zip": "A7"}, timestamp=7, run=False)
        h.run()
        zip_seen = h.outputs("enriched")[0][1]["zip"]
    assert zip_seen == ("A7" if inputs.index("profiles") < inputs.index("views") else None)

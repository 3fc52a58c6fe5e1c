"""TaskHarness takes the records waiting in several inputs as a job takes a backlog
(samzapy.testing.run.DeliveryOrder, ``task.input.order``), and stamps what the task sends
"now" (MemoryBroker.now): records sent while the task is down come, at the restart, in
timestamp order (ties: the stream's place in task.inputs), or in the order sent with
``arrival``."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy import OutgoingMessageEnvelope, StreamTask
from samzapy.testing import MemoryBroker, TaskHarness

CONFIG = {
    "task.inputs": "kafka.clicks,kafka.views",
    "systems.kafka.samza.key.serde": "string",
    "systems.kafka.samza.msg.serde": "json",
    "systems.kafka.samza.offset.default": "oldest",  # a restart without a commit reads it all
}


class Echo(StreamTask):
    """Sends each message on, named by its stream."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        stream = envelope.system_stream_partition.stream
        collector.send(OutgoingMessageEnvelope("kafka.seen", key="k", message=f"{stream}:{envelope.message}"))


def _seen(h: TaskHarness) -> list[str]:
    return [o.message for o in h.outputs]


def _backlog(order: str | None) -> TaskHarness:
    config = {**CONFIG, **({"task.input.order": order} if order else {})}
    h = TaskHarness(Echo, config)
    h.crash()
    h.send("kafka.views", "k", "v3", timestamp=30)
    h.send("kafka.views", "k", "v1", timestamp=10)  # one partition: offset order stays
    h.send("kafka.clicks", "k", "c2", timestamp=20)
    h.send("kafka.clicks", "k", "c0", timestamp=10)
    h.restart()
    return h


def test_a_backlog_in_two_inputs_comes_in_timestamp_order() -> None:
    h = _backlog(None)
    try:
        # heads: views v3@30 / clicks c2@20 -> c2; then c0@10 vs v3@30 -> c0; then v3, v1
        assert _seen(h) == ["clicks:c2", "clicks:c0", "views:v3", "views:v1"]
    finally:
        h.close()


def test_arrival_order_takes_the_backlog_as_sent() -> None:
    h = _backlog("arrival")
    try:
        assert _seen(h) == ["views:v3", "views:v1", "clicks:c2", "clicks:c0"]
    finally:
        h.close()


@pytest.mark.parametrize("first", ["kafka.views", "kafka.clicks"])
def test_equal_timestamps_go_by_the_place_in_task_inputs(first: str) -> None:
    other = "kafka.clicks" if first == "kafka.views" else "kafka.views"
    h = TaskHarness(Echo, CONFIG)
    try:
        h.crash()
        h.send(first, "k", "a", timestamp=5)
        h.send(other, "k", "b", timestamp=5)
        h.restart()
        assert [s.split(":")[0] for s in _seen(h)] == ["clicks", "views"]  # task.inputs' order
    finally:
        h.close()


def test_what_the_task_sends_is_stamped_after_what_the_broker_holds() -> None:
    broker = MemoryBroker()
    h = TaskHarness(Echo, CONFIG, broker=broker, loopback=True)
    try:
        h.send("kafka.views", "k", "v", timestamp=1_000)
        assert [r.timestamp for r in h.records("seen")] == [1_001]
        assert broker.now() == 1_002
    finally:
        h.close()

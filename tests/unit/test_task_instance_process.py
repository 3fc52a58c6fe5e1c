"""``TaskInstance.process_records`` without a broker: the envelopes a task sees, the offsets,
the output ids, and the error policy on bad records and failing calls."""

from __future__ import annotations

import pytest
from kafka.consumer.fetcher import ConsumerRecord

from samzapy import OutgoingMessageEnvelope, StreamTask
from samzapy.config import Config, parse_job_config
from samzapy.container.collector import OutputStreams, TaskCollector
from samzapy.container.error_policy import ErrorPolicy, MessageFailure
from samzapy.container.task_instance import TaskInstance
from samzapy.metrics import MetricsGroup
from samzapy.serdes import JsonSerde, StringSerde
from samzapy.streams import SystemStream, SystemStreamPartition
from samzapy.task import IncomingMessageEnvelope

SSP = SystemStreamPartition("kafka", "in", 0)
OUT = SystemStream("kafka", "out")


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send(self, topic, key, value, partition=None, headers=None):  # type: ignore[no-untyped-def]
        self.sent.append((topic, key, value, partition, headers))


class FakeSerdes:
    def for_stream(self, stream: SystemStream) -> tuple[StringSerde, JsonSerde]:
        return StringSerde(), JsonSerde()


class Echo(StreamTask):
    """Keeps every envelope; echoes it to ``out``; fails on ``{"fail": true}``; asks for a
    commit on ``{"commit": true}``."""

    def __init__(self) -> None:
        self.seen: list[IncomingMessageEnvelope] = []

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        self.seen.append(envelope)
        if envelope.message.get("commit"):
            coordinator.commit()
        collector.send(OutgoingMessageEnvelope(OUT, key=envelope.key, message=envelope.message))
        if envelope.message.get("fail"):
            raise ValueError("asked to fail")


def record(offset: int, key: bytes | None, value: bytes, headers: list | None = None) -> ConsumerRecord:
    return ConsumerRecord(
        "in",
        0,
        None,
        offset,
        1000 + offset,
        0,
        key,
        value,
        headers or [],
        None,
        len(key or b""),
        len(value),
        -1,
    )


def instance(**extra: str) -> tuple[TaskInstance, Echo, FakeProducer]:
    config = parse_job_config(
        Config.from_dict(
            {"job.name": "j", "task.class": "samzapy:StreamTask", "task.inputs": "kafka.in", **extra}
        )
    )
    producer = FakeProducer()
    collector = TaskCollector("Partition 0", producer, OutputStreams(FakeSerdes(), lambda stream: 4))
    task = Echo()
    serdes = {SSP: (StringSerde(), JsonSerde())}
    policy = ErrorPolicy(config, producer)
    return (
        TaskInstance("Partition 0", 0, task, {}, collector, serdes, policy, MetricsGroup("t")),
        task,
        producer,
    )


def test_envelopes_carry_the_deserialised_record_and_outputs_get_offset_ids() -> None:
    task_instance, task, producer = instance()
    records = [record(5, b"u1", b'{"n":1}', [("h", b"x")]), record(6, None, b'{"n":2}')]

    assert task_instance.process_records(SSP, records) == 2

    assert task.seen == [
        IncomingMessageEnvelope(SSP, 5, "u1", {"n": 1}, 1005, 9, [("h", b"x")]),
        IncomingMessageEnvelope(SSP, 6, None, {"n": 2}, 1006, 7, []),
    ]
    assert (task.seen[0].stream, task.seen[0].partition, task.seen[0].system_stream) == (
        "in",
        0,
        SSP.system_stream,
    )
    assert [dict(sent[4])["samzapy.id"] for sent in producer.sent] == [
        b"Partition 0:in:5:0",
        b"Partition 0:in:6:0",
    ]
    assert task_instance.offsets[SSP] == 7
    assert task_instance.metrics.snapshot()["messages-actually-processed"] == 2


def test_processing_stops_right_after_the_call_that_asks_for_a_commit() -> None:
    task_instance, task, _ = instance()
    records = [record(0, b"a", b"{}"), record(1, b"a", b'{"commit":true}'), record(2, b"a", b"{}")]

    assert task_instance.process_records(SSP, records) == 2
    assert task_instance.offsets[SSP] == 2
    task_instance.coordinator.commit_requested = False
    assert task_instance.process_records(SSP, records, 2) == 3
    assert [e.offset for e in task.seen] == [0, 1, 2]


def test_a_bad_record_is_skipped_when_configured_and_stops_the_task_otherwise() -> None:
    task_instance, task, _ = instance(**{"task.drop.deserialization.errors": "true"})
    assert task_instance.process_records(SSP, [record(0, b"a", b"not json"), record(1, b"a", b"{}")]) == 2
    assert [e.offset for e in task.seen] == [1] and task_instance.offsets[SSP] == 2

    task_instance, task, _ = instance()
    with pytest.raises(MessageFailure, match="could not deserialise.*offset 3") as failure:
        task_instance.process_records(SSP, [record(3, b"a", b"not json")])
    assert failure.value.safe_to_commit and SSP not in task_instance.offsets


def test_a_failing_call_that_sent_an_output_is_not_safe_to_commit() -> None:
    task_instance, task, _ = instance()
    with pytest.raises(MessageFailure, match="process\\(\\) raised.*offset 1") as failure:
        task_instance.process_records(SSP, [record(0, b"a", b"{}"), record(1, b"a", b'{"fail":true}')])
    assert not failure.value.safe_to_commit
    assert task_instance.offsets[SSP] == 1  # the failed record is not committed

"""The one error policy (``samzapy/container/error_policy.py``) through the sync and async
runners, without a broker: storage failures stop whatever the policy says, ignored exceptions
go to the dead-letter stream when there is one, records too large for it go as references,
and "did the call write anything" comes from the task's write counter."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kafka.consumer.fetcher import ConsumerRecord

from samzapy import AsyncStreamTask, OutgoingMessageEnvelope, StreamTask
from samzapy.config import Config, parse_job_config
from samzapy.container.async_runner import AsyncRunner
from samzapy.container.collector import OutputStreams
from samzapy.container.error_policy import (
    REFERENCE_PREVIEW_BYTES,
    ErrorPolicy,
    MessageFailure,
    storage_failure_in,
)
from samzapy.container.task_builder import TaskBuilder
from samzapy.errors import StorageFailure
from samzapy.kafka.producer import RecordTooLargeError
from samzapy.metrics import MetricsRegistry
from samzapy.streams import SystemStream, SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)
OUT = SystemStream("kafka", "out")
SST = "/data/state/counts/Partition_0/000042.sst"


class FakeProducer:
    """Keeps what it is sent; refuses records larger than ``limit`` as kafka-python does."""

    def __init__(self, limit: int = 1_048_576) -> None:
        self.sent: list[tuple] = []
        self.limit = limit

    def send(self, topic, key, value, partition=None, headers=None):  # type: ignore[no-untyped-def]
        size = len(key or b"") + len(value or b"") + sum(len(n) + len(v) for n, v in headers or [])
        if size > self.limit:
            raise RecordTooLargeError(topic, partition, key, size, self.limit)
        self.sent.append((topic, key, value, partition, headers))

    def to(self, topic: str) -> list[tuple]:
        return [s for s in self.sent if s[0] == topic]


class Counting(StreamTask):
    """Counts per key in store ``counts``; a message says how to fail (before or after the put)."""

    def init(self, context):  # type: ignore[no-untyped-def]
        self.counts = context.get_store("counts")

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        mode = envelope.message
        if mode == "value-error":
            raise ValueError("ignored kind")
        if mode.startswith("key-error"):
            raise KeyError("another kind")
        self.counts.put(envelope.key, str(int(self.counts.get(envelope.key) or 0) + 1))
        if mode == "fail-after-put":
            raise ValueError("after a write")
        collector.send(OutgoingMessageEnvelope(OUT, key=envelope.key, message=mode))


def record(offset: int, value: bytes, key: bytes = b"k") -> ConsumerRecord:
    return ConsumerRecord("in", 0, None, offset, offset, 0, key, value, [], None, len(key), len(value), -1)


def build(tmp_path, task=None, **extra: str):  # type: ignore[no-untyped-def]
    props = {
        "job.name": "j",
        "task.class": "samzapy:StreamTask",
        "task.inputs": "kafka.in",
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "stores.counts.factory": "inmemory",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "string",
        "stores.counts.object.cache.size": "0",  # a put goes down to the engine at once
        **extra,
    }
    config = Config.from_dict(props)
    job = parse_job_config(config)
    producer = FakeProducer()
    builder = TaskBuilder(job, base_dir=tmp_path, registry=MetricsRegistry())
    stores = builder.stores(0)
    outputs = OutputStreams(builder.serdes, lambda stream: 1)
    instance = builder.instance(
        0, task or Counting(), stores, producer, outputs, [SSP], ErrorPolicy(job, producer)
    )
    return instance, producer, job


def fail_engine_puts(instance) -> None:  # type: ignore[no-untyped-def]
    """The engine under the store's layers raises what rocksdict raises on a full disk, as the
    store layers report it: a StorageFailure naming the store and the file."""
    raw = instance.stores["counts"].raw

    def put(key: bytes, value: bytes | None) -> None:
        try:
            raise OSError(28, "No space left on device")
        except OSError as error:
            raise StorageFailure("IO error: No space left on device", store="counts", path=SST) from error

    raw.put = put


def test_storage_failure_in_a_store_put_is_never_skipped_nor_dead_lettered(tmp_path) -> None:
    instance, producer, _ = build(
        tmp_path, **{"task.ignored.exceptions": "*", "task.dead.letter.stream": "kafka.dlq"}
    )
    fail_engine_puts(instance)

    with pytest.raises(MessageFailure) as stopped:
        instance.process_records(SSP, [record(0, b"ok"), record(1, b"ok")])

    text = str(stopped.value)
    assert "store 'counts'" in text and SST in text and "offset 0" in text
    assert "never skipped or dead-lettered" in text and "rebuilt from its changelog" in text
    assert not stopped.value.safe_to_commit  # nothing after the last commit is committed
    assert storage_failure_in(stopped.value).path == SST
    assert producer.sent == []  # neither dead-lettered nor any output
    assert (instance.failures.skipped.value, instance.failures.dead_lettered.value) == (0, 0)
    assert SSP not in instance.offsets  # the failed message is not done


def test_storage_failure_anywhere_in_the_cause_chain_stops_the_task(tmp_path) -> None:
    class Wrapping(Counting):
        def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
            try:
                super().process(envelope, collector, coordinator)
            except StorageFailure as error:
                raise RuntimeError("the task wrapped it") from error

    instance, producer, _ = build(
        tmp_path, Wrapping(), **{"task.ignored.exceptions": "*", "task.dead.letter.stream": "kafka.dlq"}
    )
    fail_engine_puts(instance)

    with pytest.raises(MessageFailure, match="store 'counts'") as stopped:
        instance.process_records(SSP, [record(0, b"ok")])
    assert not stopped.value.safe_to_commit and producer.sent == []


def test_storage_failure_in_an_async_task_is_not_retried_nor_dead_lettered(tmp_path) -> None:
    class AsyncCounting(AsyncStreamTask):
        attempts = 0

        def init(self, context):  # type: ignore[no-untyped-def]
            self.counts = context.get_store("counts")

        async def process_async(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
            AsyncCounting.attempts += 1
            await asyncio.sleep(0)
            self.counts.put(envelope.key, "1")

    extra = {
        "task.ignored.exceptions": "*",
        "task.dead.letter.stream": "kafka.dlq",
        "task.retry.max.attempts": "3",
        "task.retry.backoff.ms": "1",
    }
    instance, producer, job = build(tmp_path, AsyncCounting(), **extra)
    fail_engine_puts(instance)
    instance.offsets[SSP] = 0
    runner = AsyncRunner([instance], job, ErrorPolicy(job, producer))
    runner.start()
    try:
        runner.submit(SSP, instance, [record(0, b"ok")])
        with pytest.raises(MessageFailure, match="store 'counts'") as stopped:
            runner.drain()
    finally:
        runner.close()
    assert not stopped.value.safe_to_commit
    assert AsyncCounting.attempts == 1 and producer.sent == []
    assert instance.offsets[SSP] == 0


def test_with_a_dead_letter_stream_every_failed_message_goes_there_ignored_or_not(tmp_path) -> None:
    instance, producer, _ = build(
        tmp_path, **{"task.ignored.exceptions": "ValueError", "task.dead.letter.stream": "kafka.dlq"}
    )
    modes = ["value-error", "key-error", "ok", "value-error", "key-error", "ok", "value-error"]
    records = [record(i, m.encode()) for i, m in enumerate(modes)]

    assert instance.process_records(SSP, records) == 7

    dead = producer.to("dlq")
    assert [r[2] for r in dead] == [
        b"value-error",
        b"key-error",
        b"value-error",
        b"key-error",
        b"value-error",
    ]
    assert [dict(r[4])["samzapy.source"] for r in dead] == [
        f"kafka.in/0/{o}".encode() for o in (0, 1, 3, 4, 6)
    ]
    assert dict(dead[0][4])["samzapy.error"] == b"process() raised: ValueError: ignored kind"
    assert (instance.failures.dead_lettered.value, instance.failures.skipped.value) == (5, 0)
    assert len(producer.to("out")) == 2 and instance.offsets[SSP] == 7


def test_without_a_dead_letter_stream_ignored_exceptions_are_skipped_and_others_stop(tmp_path) -> None:
    instance, producer, _ = build(tmp_path, **{"task.ignored.exceptions": "ValueError"})
    records = [
        record(0, b"value-error"),
        record(1, b"ok"),
        record(2, b"value-error"),
        record(3, b"key-error"),
    ]

    with pytest.raises(MessageFailure, match="offset 3: KeyError"):
        instance.process_records(SSP, records)

    assert instance.failures.skipped.value == 2 and instance.failures.dead_lettered.value == 0
    assert instance.offsets[SSP] == 3 and len(producer.to("out")) == 1


def test_undeserialisable_messages_go_to_the_dead_letter_stream_even_when_dropped(tmp_path) -> None:
    instance, producer, _ = build(
        tmp_path,
        **{
            "task.drop.deserialization.errors": "true",
            "task.dead.letter.stream": "kafka.dlq",
            "systems.kafka.samza.msg.serde": "json",
        },
    )
    assert instance.process_records(SSP, [record(0, b"{not json"), record(1, b"{nor this")]) == 2
    assert [r[2] for r in producer.to("dlq")] == [b"{not json", b"{nor this"]
    assert instance.failures.dead_lettered.value == 2 and instance.failures.skipped.value == 0


def test_a_record_too_large_for_the_dead_letter_stream_goes_there_as_a_reference(tmp_path) -> None:
    instance, producer, _ = build(tmp_path, **{"task.dead.letter.stream": "kafka.dlq"})
    producer.limit = 10_000
    big = b"key-error" + b"x" * 20_000
    records = [record(0, b"ok"), record(1, big, key=b"user-7"), record(2, b"ok")]

    assert instance.process_records(SSP, records) == 3

    [(topic, key, value, _, headers)] = producer.to("dlq")
    found = dict(headers)
    assert key == b"user-7" and value == big[:REFERENCE_PREVIEW_BYTES]
    assert found["samzapy.truncated"] == b"true"
    assert found["samzapy.size"] == str(len(big) + 6).encode()
    assert found["samzapy.source"] == b"kafka.in/0/1"
    assert found["samzapy.error"].startswith(b"process() raised: KeyError")
    sent_size = len(big) + 6 + sum(len(n) + len(found[n]) for n in ("samzapy.error", "samzapy.source"))
    assert found["samzapy.reference"] == f"{sent_size} bytes > max.request.size 10000".encode()
    assert instance.failures.references.value == 1 and instance.failures.dead_lettered.value == 1
    assert instance.offsets[SSP] == 3 and len(producer.to("out")) == 2  # the job goes on


def test_a_failed_call_that_wrote_to_a_store_is_not_safe_to_commit(tmp_path) -> None:
    instance, _, _ = build(tmp_path)
    with pytest.raises(MessageFailure) as after_write:
        instance.process_records(SSP, [record(0, b"fail-after-put")])
    assert not after_write.value.safe_to_commit

    instance, _, _ = build(tmp_path / "second")
    with pytest.raises(MessageFailure) as before_write:
        instance.process_records(SSP, [record(0, b"value-error")])
    assert before_write.value.safe_to_commit


def test_stores_and_collector_of_a_task_share_its_write_counter(tmp_path) -> None:
    instance, _, _ = build(tmp_path)
    assert instance.stores["counts"].writes is instance.writes is instance.collector.writes
    instance.process_records(SSP, [record(0, b"ok"), record(1, b"ok")])
    assert instance.writes.value == 4  # two puts, two outputs


def test_too_large_output_names_stream_size_key_and_the_settings_to_change(tmp_path) -> None:
    instance, producer, _ = build(tmp_path)
    producer.limit = 100
    with pytest.raises(MessageFailure) as stopped:
        instance.process_records(SSP, [record(0, b"o" * 200, key=b"user-9")])
    text = str(stopped.value)
    assert "topic 'out'" in text and "user-9" in text and "bytes" in text
    assert "systems.kafka.producer.max.request.size" in text and "task.drop.producer.errors" in text


def test_drop_producer_errors_drops_and_counts_a_too_large_output(tmp_path) -> None:
    instance, producer, _ = build(tmp_path, **{"task.drop.producer.errors": "true"})
    producer.limit = 100
    records = [record(0, b"o" * 200), record(1, b"ok"), record(2, b"p" * 300)]

    assert instance.process_records(SSP, records) == 3

    assert [r[2] for r in producer.to("out")] == [b"ok"]
    assert instance.metrics.counter("producer-errors-dropped").value == 2
    assert instance.offsets[SSP] == 3


def test_the_dead_letter_send_of_a_fake_record_uses_only_record_fields() -> None:
    """The policy needs key, value, headers and offset of a record, nothing else."""
    job = parse_job_config(
        Config.from_dict(
            {
                "job.name": "j",
                "task.class": "samzapy:StreamTask",
                "task.inputs": "kafka.in",
                "task.dead.letter.stream": "kafka.dlq",
            }
        )
    )
    producer = FakeProducer()
    fake = SimpleNamespace(key=None, value=b"v", headers=None, offset=9)
    ErrorPolicy(job, producer).dead_letter_send(SSP, fake, "why")
    assert producer.sent == [
        ("dlq", None, b"v", None, [("samzapy.error", b"why"), ("samzapy.source", b"kafka.in/0/9")])
    ]

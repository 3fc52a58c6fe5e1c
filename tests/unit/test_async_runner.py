"""The async runner without a broker: lanes, offsets, retries, timeouts, dead letters, delays."""

from __future__ import annotations

import asyncio
import time
import zlib
from types import SimpleNamespace

import pytest

from samzapy import AsyncStreamTask, OutgoingMessageEnvelope
from samzapy.config import Config, parse_job_config
from samzapy.container.async_runner import AsyncRunner
from samzapy.container.error_policy import ErrorPolicy, MessageFailure
from samzapy.container.task_instance import TaskInstance
from samzapy.metrics import Counter, MetricsGroup
from samzapy.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


def job(**extra: str):
    return parse_job_config(
        Config.from_dict(
            {"job.name": "j", "task.class": "samzapy:StreamTask", "task.inputs": "kafka.in", **extra}
        )
    )


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send(self, topic, key, value, partition=None, headers=None):
        self.sent.append((topic, key, value, partition, headers))


class FakeCollector:
    def __init__(self) -> None:
        self.sent: list[OutgoingMessageEnvelope] = []
        self.writes = Counter()  # the task's write counter, as TaskCollector's

    def send(self, envelope):
        self.sent.append(envelope)


def record(offset: int, key: bytes | None, value: bytes = b"v", timestamp: int = 0):
    return SimpleNamespace(
        offset=offset,
        key=key,
        value=value,
        timestamp=timestamp,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value),
        headers=[],
    )


def make(task: AsyncStreamTask, **extra: str):
    config = job(**extra)
    producer = FakeProducer()
    collector = FakeCollector()
    metrics = MetricsGroup("task.Partition 0")
    instance = TaskInstance(
        "Partition 0", 0, task, {}, collector, {SSP: (None, None)}, ErrorPolicy(config, producer), metrics
    )
    instance.offsets[SSP] = 0
    runner = AsyncRunner([instance], config, ErrorPolicy(config, producer))
    runner.start()
    return runner, instance, producer, collector


class Recording(AsyncStreamTask):
    """Sleeps a little per message; records order and concurrency."""

    def __init__(self, sleep=lambda offset: 0.001 * (offset % 3)) -> None:
        self.sleep = sleep
        self.finished: list[tuple[bytes, int]] = []
        self.running = 0
        self.max_running = 0

    async def process_async(self, envelope, collector, coordinator):
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.sleep(envelope.offset))
            collector.send(OutgoingMessageEnvelope("kafka.out", key=envelope.key, message=b"x"))
            self.finished.append((envelope.key, envelope.offset))
        finally:
            self.running -= 1


def test_same_key_runs_in_offset_order_and_different_keys_in_parallel():
    task = Recording(sleep=lambda offset: 0.003 if offset % 5 == 0 else 0.0005)
    runner, instance, _, collector = make(task, **{"task.max.concurrency": "4"})
    records = [record(i, f"k{i % 7}".encode()) for i in range(200)]

    runner.submit(SSP, instance, records)
    runner.drain()

    assert 1 < task.max_running <= 4
    for key in {k for k, _ in task.finished}:
        offsets = [o for k, o in task.finished if k == key]
        assert offsets == sorted(offsets)
    assert len(task.finished) == 200
    assert instance.offsets[SSP] == 200
    assert {e.id for e in collector.sent} == {f"Partition 0:{i}:0" for i in range(200)}
    runner.close()


def test_the_offset_never_passes_a_message_still_in_flight():
    task = Recording(sleep=lambda offset: 0.02 if offset == 3 else 0.0)
    runner, instance, _, _ = make(task, **{"task.max.concurrency": "8"})

    runner.submit(SSP, instance, [record(i, f"k{i}".encode()) for i in range(20)])
    for _ in range(3):
        runner.pump()

    assert (b"k3", 3) not in task.finished and len(task.finished) >= 10
    assert instance.offsets[SSP] == 3
    runner.drain()
    assert instance.offsets[SSP] == 20
    runner.close()


class Flaky(AsyncStreamTask):
    """Fails the first ``fails[offset]`` attempts of a message; ``-1``: always."""

    def __init__(self, fails: dict[int, int], hang: set[int] = frozenset()) -> None:
        self.fails = fails
        self.hang = hang
        self.calls: dict[int, int] = {}

    async def process_async(self, envelope, collector, coordinator):
        offset = envelope.offset
        self.calls[offset] = self.calls.get(offset, 0) + 1
        if offset in self.hang and self.calls[offset] == 1:
            await asyncio.sleep(10)
        if self.fails.get(offset, 0) == -1 or self.calls[offset] <= self.fails.get(offset, 0):
            raise ConnectionError(f"attempt {self.calls[offset]}")


def test_failures_are_retried_with_backoff_then_dead_lettered():
    task = Flaky({1: 2, 4: -1})
    runner, instance, producer, _ = make(
        task,
        **{
            "task.max.concurrency": "2",
            "task.retry.max.attempts": "2",
            "task.retry.backoff.ms": "5",
            "task.dead.letter.stream": "kafka.dlq",
        },
    )
    started = time.monotonic()

    runner.submit(SSP, instance, [record(i, b"k") for i in range(6)])
    runner.drain()

    assert time.monotonic() - started >= 0.015  # 5 ms then 10 ms before message 1's third attempt
    assert task.calls == {0: 1, 1: 3, 2: 1, 3: 1, 4: 3, 5: 1}
    snapshot = instance.metrics.snapshot()
    assert snapshot["retries"] == 4
    assert snapshot["dead-lettered"] == 1
    assert snapshot["messages-actually-processed"] == 5
    assert snapshot["in-flight"] == 0
    [(topic, _, _, _, headers)] = producer.sent
    assert topic == "dlq" and (b"kafka.in/0/4") in dict(headers).values()
    assert instance.offsets[SSP] == 6
    runner.close()


def test_a_call_longer_than_the_timeout_is_cancelled_and_retried():
    task = Flaky({}, hang={2})
    runner, instance, _, _ = make(
        task,
        **{"task.callback.timeout.ms": "20", "task.retry.max.attempts": "1", "task.retry.backoff.ms": "0"},
    )

    runner.submit(SSP, instance, [record(i, b"k") for i in range(4)])
    runner.drain()

    assert task.calls[2] == 2
    assert instance.metrics.snapshot()["timeouts"] == 1
    assert instance.offsets[SSP] == 4
    runner.close()


def test_a_failure_without_dead_letter_stream_stops_and_commits_nothing():
    task = Flaky({2: -1})
    runner, instance, _, _ = make(task)

    runner.submit(SSP, instance, [record(i, b"k") for i in range(5)])
    with pytest.raises(MessageFailure, match="offset 2") as failure:
        runner.drain()

    assert not failure.value.safe_to_commit
    assert instance.offsets[SSP] == 2
    runner.close()


def test_the_delay_queue_holds_a_message_until_its_timestamp_plus_the_delay():
    task = Recording(sleep=lambda offset: 0)
    runner, instance, _, _ = make(task, **{"task.process.delay.ms": "50", "task.max.concurrency": "2"})
    now_ms = int(time.time() * 1000)
    started = time.monotonic()

    a, b = b"a", next(k for k in (b"b", b"c", b"d", b"e") if zlib.crc32(k) % 2 != zlib.crc32(b"a") % 2)
    runner.submit(SSP, instance, [record(0, a, timestamp=now_ms), record(1, b, timestamp=now_ms - 60_000)])
    runner.pump()

    assert task.finished == [(b, 1)]  # old enough: at once
    assert instance.metrics.snapshot()["delayed"] == 1
    runner.drain()
    assert time.monotonic() - started >= 0.045
    assert [o for _, o in task.finished] == [1, 0]
    runner.close()


def test_a_full_task_is_bounded_by_its_queue_size():
    task = Recording(sleep=lambda offset: 0.001)
    runner, instance, _, _ = make(task, **{"task.async.queue.size": "10", "task.max.concurrency": "2"})

    assert runner.poll_budget(5000) == 10
    runner.submit(SSP, instance, [record(i, f"k{i}".encode()) for i in range(50)])  # runs while full
    runner.drain()

    assert instance.metrics.snapshot()["max-queue-length"] == 10
    assert len(task.finished) == 50
    runner.close()


def test_process_runs_the_coroutine_for_one_message_drivers():
    task = Recording(sleep=lambda offset: 0)
    collector = FakeCollector()
    from samzapy import IncomingMessageEnvelope

    task.process(IncomingMessageEnvelope(SSP, 7, b"k", b"v"), collector, None)

    assert task.finished == [(b"k", 7)]

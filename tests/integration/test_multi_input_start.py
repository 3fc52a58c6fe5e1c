"""A job with two inputs starts every time, also under load (issue 28 item 0).

The crash: ``KeyError: TopicPartition(...)`` from kafka-python's ``beginning_offsets`` at
start-up. Reading each input partition's last batch (``true_end_offsets``) assigns the
consumer one partition at a time; about 100 ms after that (kafka-python's metadata retry
backoff) the client's metadata answer for the last assignment lands and it forgets the other
input's topic, and kafka-python then answers a multi-topic ``beginning_offsets`` without that
topic's partitions (see :mod:`samzapy.kafka.offsets`). Whether the answer lands first is a
race that load decides: this test runs the container's start-up step (a fresh consumer and
:func:`samzapy.container.startup.input_partitions`, as ``open_inputs`` does) in-process 30
times while a busy thread competes for the interpreter, as a task busy on the CPU does in a
container (a busy *process* on another core slowed the start too little on a 2-core machine:
1 failure in 30). Before the fix, this test's 30 starts failed 12 times (8 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from support import create_topic, produce

from samzapy.config import Config
from samzapy.config.job import parse_job_config
from samzapy.container.startup import input_partitions
from samzapy.errors import KafkaSystemError
from samzapy.kafka.offsets import beginning_offsets, end_offsets
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.records import TopicPartition
from samzapy.streams import SystemStream, task_name_for

pytestmark = pytest.mark.integration

PARTITIONS = 2
STARTS = 30


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """A thread of this process busy on the CPU for the duration of the test."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin, name="cpu-load", daemon=True)
    spinner.start()
    try:
        yield
    finally:
        stop.set()
        spinner.join()


def _two_inputs(broker: str, base: str) -> tuple[str, str]:
    left, right = f"{base}-left", f"{base}-right"
    for topic in (left, right):
        create_topic(broker, topic, PARTITIONS)
        produce(broker, topic, ((b"k%d" % i, b"v") for i in range(5 * PARTITIONS)), partition=None)
    return left, right


def test_a_two_input_job_starts_30_times_in_a_row_under_load(
    broker: str, topic_name: str, cpu_load: None
) -> None:
    left, right = _two_inputs(broker, topic_name)
    job = parse_job_config(
        Config.from_dict(
            {
                "job.name": "two-inputs",
                "task.class": "runtime_tasks:IgnoresEverything",
                "task.inputs": f"kafka.{left},kafka.{right}",
                "systems.kafka.consumer.bootstrap.servers": broker,
                "systems.kafka.samza.offset.default": "oldest",
            }
        )
    )
    tasks = [SimpleNamespace(partition=p, task_name=task_name_for(p)) for p in range(PARTITIONS)]
    counts = {SystemStream("kafka", left): PARTITIONS, SystemStream("kafka", right): PARTITIONS}
    for start in range(STARTS):
        consumer = reader_consumer(broker)
        try:
            parts = input_partitions(job, consumer, tasks, counts, {})
        finally:
            consumer.close()
        assert len(parts) == 2 * PARTITIONS, f"start {start}"
        assert {part.start_offset for part in parts} == {0}, f"start {start}"
        assert sum(part.start_end for part in parts) == 2 * 5 * PARTITIONS, f"start {start}"


def test_offsets_of_a_topic_the_metadata_forgot_are_asked_again(broker: str, topic_name: str) -> None:
    """The crash's mechanism without the race: wait until the metadata answer for the last
    assignment has made the client forget the first topic, then ask both topics' offsets."""
    left, right = _two_inputs(broker, topic_name)
    consumer = reader_consumer(broker)
    try:
        first, last = TopicPartition(left, 0), TopicPartition(right, 0)
        for tp in (first, last):
            list(read_partition(consumer, tp, 0))
        time.sleep(0.5)  # kafka-python refreshes the metadata 100 ms (retry backoff) after the assign
        assert beginning_offsets(consumer, [first, last]) == {first: 0, last: 0}
        list(read_partition(consumer, first, 0))
        time.sleep(0.5)
        ends = end_offsets(consumer, [first, last])
        assert set(ends) == {first, last}
        assert all(end > 0 for end in ends.values())
    finally:
        consumer.close()


def test_a_partition_that_does_not_exist_fails_with_its_name_after_a_bounded_wait(
    broker: str, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    consumer = reader_consumer(broker)
    try:
        with pytest.raises(KafkaSystemError) as raised:
            beginning_offsets(
                consumer, [TopicPartition(topic_name, 0), TopicPartition(topic_name, 3)], timeout_s=1
            )
    finally:
        consumer.close()
    message = str(raised.value)
    assert f"could not learn the first offsets of {topic_name}.0, {topic_name}.3 within 1 s" in message
    assert f"last: no answer for {topic_name}.3)" in message

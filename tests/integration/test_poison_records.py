"""Poison records never stall a job (issue 21, item 3), on the real dev broker: an input
record too large for the dead-letter stream goes there as a reference, and an output larger
than the producer accepts stops the job with an error that says what to change, or is dropped
and counted with ``task.drop.producer.errors=true``."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support import consume_all, create_topic, header, metric_sum, read_metrics, run_job, write_config

from samzapy.kafka.producer import Producer

pytestmark = pytest.mark.integration

POISON_BYTES = 2 * 1024 * 1024


def echo_config(tmp_path: Path, broker: str, name: str, **extra: str) -> Path:
    props = {
        "job.name": name,
        "task.class": "runtime_tasks:EchoTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "500",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "json",
        f"systems.kafka.streams.{name}-in.samza.offset.default": "oldest",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        **extra,
    }
    return write_config(tmp_path / f"{name}.properties", props)


def produce_big(broker: str, topic: str, values: list[bytes], partition: int) -> None:
    """Produce with a request limit large enough for the poison record (the broker takes it)."""
    producer = Producer(broker, {"max_request_size": 3 * POISON_BYTES})
    try:
        for value in values:
            producer.send(topic, b"k", value, partition=partition)
        producer.flush()
    finally:
        producer.close()


def echoed(broker: str, name: str) -> list[int]:
    return sorted(orjson.loads(r.value)["n"] for r in consume_all(broker, f"{name}-in-out"))


def test_a_2mb_input_record_goes_to_the_dead_letter_stream_as_a_reference_and_the_job_goes_on(
    tmp_path, broker
):
    name = "poison-2mb"
    create_topic(broker, f"{name}-in", 2)
    poison = b"{" + b"x" * (POISON_BYTES - 1)  # not JSON: it cannot be deserialised
    values = [orjson.dumps({"n": n}) for n in range(1000)]
    values.insert(500, poison)
    produce_big(broker, f"{name}-in", values, partition=1)
    metrics = tmp_path / "metrics.json"
    config = echo_config(tmp_path, broker, name, **{"task.dead.letter.stream": f"kafka.{name}-dlq"})

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert echoed(broker, name) == list(range(1000))  # every other message, exactly once
    [dead] = consume_all(broker, f"{name}-dlq")
    assert dead.key == b"k" and dead.value == poison[:1024]
    assert header(dead, "samzapy.truncated") == b"true"
    assert header(dead, "samzapy.size") == str(POISON_BYTES + 1).encode()
    assert header(dead, "samzapy.source") == f"kafka.{name}-in/1/500".encode()
    assert header(dead, "samzapy.error").startswith(b"could not deserialise: ")
    assert header(dead, "samzapy.reference").endswith(b"bytes > max.request.size 1048576")
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "task.", "dead-letter-references") == 1
    assert metric_sum(snapshot, "task.", "dead-lettered") == 1
    assert metric_sum(snapshot, "task.", "skipped-messages") == 0
    assert "too large for kafka.poison-2mb-dlq: sent a reference" in result.stderr


def produce_with_big_outputs(broker: str, name: str) -> None:
    """Ten messages on partition 0; those with n = 3 and 7 carry 6,000 bytes of padding."""
    create_topic(broker, f"{name}-in", 1)
    values = [orjson.dumps({"n": n, "pad": "x" * (6000 if n in (3, 7) else 10)}) for n in range(10)]
    produce_big(broker, f"{name}-in", values, partition=0)


def test_an_output_larger_than_the_producer_accepts_stops_the_job_saying_what_to_change(tmp_path, broker):
    name = "big-output-stop"
    produce_with_big_outputs(broker, name)
    config = echo_config(tmp_path, broker, name, **{"systems.kafka.producer.max.request.size": "4000"})

    result = run_job(config, "--exit-at-end")

    assert result.returncode == 1
    assert f"stream 'kafka.{name}-in' partition 0 offset 3" in result.stderr
    assert f"to topic '{name}-in-out'" in result.stderr and "(key b'k')" in result.stderr
    assert "the producer accepts at most 4,000 bytes per record" in result.stderr
    assert "raise systems.kafka.producer.max.request.size" in result.stderr
    assert "task.drop.producer.errors=true" in result.stderr
    assert echoed(broker, name) == [0, 1, 2]  # everything before it was committed, nothing after


def test_drop_producer_errors_drops_and_counts_outputs_the_producer_refuses(tmp_path, broker):
    name = "big-output-drop"
    produce_with_big_outputs(broker, name)
    metrics = tmp_path / "metrics.json"
    config = echo_config(
        tmp_path,
        broker,
        name,
        **{"systems.kafka.producer.max.request.size": "4000", "task.drop.producer.errors": "true"},
    )

    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert result.returncode == 0, result.stderr[-3000:]
    assert echoed(broker, name) == [0, 1, 2, 4, 5, 6, 8, 9]
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "task.", "producer-errors-dropped") == 2
    assert metric_sum(snapshot, "task.", "messages-actually-processed") == 10

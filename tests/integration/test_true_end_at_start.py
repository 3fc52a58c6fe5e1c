"""The start log shows each input's true end offset, and "upcoming" starts there (issue 16
item 7): the dev broker reports the base offset of the last batch + 1 (1 for a topic of 51
records written in one batch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka import TopicPartition
from support import run_job, write_config

from samzapy.cli import main
from samzapy.kafka.reading import reader_consumer, true_end_offsets

pytestmark = pytest.mark.integration


def _produce_51(broker: str, topic: str) -> None:
    lines = "".join(f'{{"n": {i}}}\n' for i in range(51))
    result = CliRunner().invoke(
        main, ["produce", topic, "--bootstrap", broker, "--partitions", "1", "--key", "k"], input=lines
    )
    assert result.exit_code == 0, result.output


def test_true_end_offsets_correct_the_reported_end(broker: str, topic_name: str) -> None:
    _produce_51(broker, topic_name)
    consumer = reader_consumer(broker)
    try:
        tp = TopicPartition(topic_name, 0)
        assert consumer.end_offsets([tp])[tp] < 51  # the dev broker's undercount this test is about
        assert true_end_offsets(consumer, [tp]) == {tp: 51}
    finally:
        consumer.close()


@pytest.mark.parametrize(("default", "start", "processed"), [("oldest", 0, 51), ("upcoming", 51, 0)])
def test_the_start_log_shows_the_true_end(
    broker: str, topic_name: str, tmp_path: Path, default: str, start: int, processed: int
) -> None:
    _produce_51(broker, topic_name)
    config = write_config(
        tmp_path / "job.properties",
        {
            "job.name": f"end-{default}",
            "task.class": "runtime_tasks:IgnoresEverything",
            "task.inputs": f"kafka.{topic_name}",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.offset.default": default,
            "job.logged.store.base.dir": str(tmp_path / "state"),
        },
    )
    result = run_job(config, "--exit-at-end")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Partition 0: kafka.{topic_name}.0 starts at offset {start} (end at start: 51)" in result.stderr
    assert f"stopped: {processed} messages processed" in result.stderr

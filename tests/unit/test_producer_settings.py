"""The producer's own setting ``buffer.memory`` next to kafka-python's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import ConfigError, load_config, parse_job_config
from samzapy.errors import KafkaSystemError
from samzapy.kafka.producer import DEFAULT_BUFFER_BYTES, producer_settings

BASE = "job.name=counter\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.pageviews\n"


def test_buffer_memory_is_a_producer_key_of_a_job(tmp_path: Path) -> None:
    file = tmp_path / "job.properties"
    file.write_text(BASE + "systems.kafka.producer.buffer.memory=1048576\n")
    job = parse_job_config(load_config(file))
    assert job.producer_overrides == {"buffer_memory": "1048576"}
    assert producer_settings("b:9092", job.producer_overrides)["buffer_memory"] == 1048576


def test_a_misspelt_buffer_memory_is_a_problem_with_the_right_name(tmp_path: Path) -> None:
    file = tmp_path / "job.properties"
    file.write_text(BASE + "systems.kafka.producer.bufer.memory=1048576\n")
    with pytest.raises(ConfigError, match=r"did you mean 'systems.kafka.producer.buffer.memory'\?"):
        parse_job_config(load_config(file))


def test_buffer_memory_takes_bytes() -> None:
    assert "buffer_memory" not in producer_settings("b:9092")  # the Producer's default applies
    assert DEFAULT_BUFFER_BYTES == 8 << 20
    assert producer_settings("b:9092", {"buffer_memory": "2e6"})["buffer_memory"] == 2_000_000
    with pytest.raises(KafkaSystemError, match="invalid value 'lots' for producer setting 'buffer.memory'"):
        producer_settings("b:9092", {"buffer.memory": "lots"})

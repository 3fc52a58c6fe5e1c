"""Config holes closed (issue 16 item 3): misspelt reserved prefixes and client settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.cli import main
from samzapy.config import Config, ConfigError, parse_job_config, parse_properties

BASE = "job.name=j\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.a\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_job_config(Config(parse_properties(BASE + text, "job.properties"), source="job.properties"))
    return info.value.problems


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("store.counts.changelog=kafka.c", "stores.counts.changelog"),
        ("system.kafka.consumer.bootstrap.servers=h:1", "systems.kafka.consumer.bootstrap.servers"),
        ("serializer.registry.s.class=string", "serializers.registry.s.class"),
        ("metric.reporters=snapshot", "metrics.reporters"),
        ("tasks.window.ms=10", "task.window.ms"),
    ],
)
def test_a_misspelt_reserved_prefix_is_an_error_with_did_you_mean(typo: str, meant: str) -> None:
    key = typo.partition("=")[0]
    first = key.partition(".")[0]
    assert problems(typo + "\n") == [
        f"Unknown key '{key}' (job.properties:4): did you mean '{meant}'? ('{first}.' is not one of "
        "samzapy's prefixes, so the key would be kept as an application key and ignored)"
    ]


def test_application_keys_that_only_look_alike_stay_application_keys() -> None:
    config = Config(parse_properties(BASE + "store.owner=ann\nmetric.name=x\napp.x=1\n", "j"), source="j")
    job = parse_job_config(config)
    assert dict(job.app_config) == {"store.owner": "ann", "metric.name": "x", "app.x": "1"}


def test_client_settings_are_checked_against_kafka_python_with_did_you_mean() -> None:
    found = problems(
        "systems.kafka.consumer.max.pol.records=5\n"
        "systems.kafka.producer.lingr.ms=5\n"
        "systems.kafka.consumer.max.poll.records=5\n"
        "systems.kafka.producer.linger_ms=5\n"
    )
    assert found == [
        "Unknown key 'systems.kafka.consumer.max.pol.records' (job.properties:4): did you mean "
        "'systems.kafka.consumer.max.poll.records'? 'max.pol.records' is not a setting of kafka-python's "
        "KafkaConsumer (its settings, dots for underscores: "
        "https://kafka-python.readthedocs.io/en/master/apidoc/KafkaConsumer.html)",
        "Unknown key 'systems.kafka.producer.lingr.ms' (job.properties:5): did you mean "
        "'systems.kafka.producer.linger.ms'? 'lingr.ms' is not a setting of kafka-python's KafkaProducer "
        "(its settings, dots for underscores: "
        "https://kafka-python.readthedocs.io/en/master/apidoc/KafkaProducer.html)",
    ]


def test_samzapy_run_exits_2_on_these_before_connecting(tmp_path: Path) -> None:
    config = tmp_path / "job.properties"
    config.write_text(
        BASE + "systems.kafka.consumer.bootstrap.servers=127.0.0.1:1\nstore.counts.changelog=kafka.c\n"
    )
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: 1 problem in {config}:\n"
        f"  - Unknown key 'store.counts.changelog' ({config}:5): did you mean 'stores.counts.changelog'? "
        "('store.' is not one of samzapy's prefixes, so the key would be kept as an application key and "
        "ignored)\n"
    )


def test_samzapy_run_exits_2_on_a_line_without_separator(tmp_path: Path) -> None:
    config = tmp_path / "job.properties"
    config.write_text(BASE + "task.commit.ms5000\n")
    result = CliRunner().invoke(main, ["run", str(config)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: 1 problem in {config}:\n"
        f"  - 'task.commit.ms5000' ({config}:4) has no separator: write key=value (a key with an empty "
        "value: key=)\n"
    )

"""``samzapy produce|consume`` with a job's serdes (Avro and its own classes), tombstones and
timestamps from a field, on the real dev broker (issue 31 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.cli import main

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "View",
    "fields": [{"name": "user", "type": "string"}, {"name": "n", "type": "long"}],
}
CSV_SERDE = """
class CsvSerde:
    def to_bytes(self, obj):
        return ",".join(obj).encode()

    def from_bytes(self, data):
        return data.decode().split(",")
"""


def _cli(*args: str, input: str | None = None):  # noqa: A002 - click's name
    return CliRunner().invoke(main, list(args), input=input)


def _job(tmp_path: Path, broker: str, topic: str) -> Path:
    (tmp_path / "view.avsc").write_text(json.dumps(SCHEMA))
    (tmp_path / "csvserde_tt.py").write_text(CSV_SERDE)
    config = tmp_path / "job.properties"
    config.write_text(
        "job.name=serdes\n"
        "task.class=samzapy.task:StreamTask\n"
        f"task.inputs=kafka.{topic}\n"
        f"systems.kafka.consumer.bootstrap.servers={broker}\n"
        "serializers.registry.views.class=avro\n"
        "serializers.registry.views.schema=view.avsc\n"
        "serializers.registry.csv.class=csvserde_tt:CsvSerde\n"
        f"systems.kafka.streams.{topic}.samza.msg.serde=views\n"
        f"systems.kafka.streams.{topic}-csv.samza.msg.serde=csv\n"
        "systems.kafka.samza.key.serde=string\n"
    )
    return config


def test_produce_and_consume_with_a_jobs_avro_serde(broker: str, topic_name: str, tmp_path: Path) -> None:
    config = str(_job(tmp_path, broker, topic_name))
    produced = _cli(
        "produce", "--config", config, "--stream", topic_name, "--key-field", "user", "--partitions", "1",
        input='{"user": "ann", "n": 1}\n{"user": "bob", "n": 2}\n',
    )  # fmt: skip
    assert produced.exit_code == 0, produced.output

    consumed = _cli("consume", "--config", config, "--stream", topic_name, "--from-beginning")
    assert consumed.exit_code == 0, consumed.output
    assert consumed.stdout.splitlines() == [
        '0:0\tann\t{"user":"ann","n":1}',
        '0:1\tbob\t{"user":"bob","n":2}',
    ]
    raw = _cli("consume", topic_name, "--bootstrap", broker, "--from-beginning", "--serde", "bytes")
    assert raw.stdout.splitlines()[0] == "0:0\tann\t\x06ann\x02"  # Avro's binary encoding, not JSON


def test_a_jobs_own_serde_class_and_a_line_it_refuses(broker: str, topic_name: str, tmp_path: Path) -> None:
    config = str(_job(tmp_path, broker, topic_name))
    stream = f"{topic_name}-csv"
    produced = _cli("produce", "--config", config, "--stream", stream, "--key", "k", "--partitions", "1",
                    input='["a", "b"]\n')  # fmt: skip
    assert produced.exit_code == 0, produced.output
    consumed = _cli("consume", stream, "--bootstrap", broker, "--from-beginning", "--serde", "string")
    assert consumed.stdout == "0:0\tk\ta,b\n"

    refused = _cli(
        "produce", "--config", config, "--stream", topic_name, "--partitions", "1", input='{"user": "ann"}\n'
    )
    assert refused.exit_code == 2
    assert refused.stderr.startswith(
        f"Error: line 1 of stdin cannot be sent with stream {topic_name}'s msg serde 'views': "
    )


def test_tombstones_and_timestamps_from_a_field(broker: str, topic_name: str) -> None:
    lines = 'ann|{"ts": 1700000000000}\nbob|{"ts": "2024-01-01T00:00:00Z"}\nann|NULL\n'
    produced = _cli(
        "produce", topic_name, "--bootstrap", broker, "--partitions", "1", "--key-separator", "|",
        "--null-value", "NULL", "--timestamp-field", "ts", input=lines,
    )  # fmt: skip
    assert produced.exit_code == 0, produced.output

    consumed = _cli("consume", topic_name, "--bootstrap", broker, "--from-beginning", "--format", "json")
    rows = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(r["key"], r["value"]) for r in rows] == [
        ("ann", {"ts": 1700000000000}),
        ("bob", {"ts": "2024-01-01T00:00:00Z"}),
        ("ann", None),
    ]
    assert [r["timestamp"] for r in rows[:2]] == [1700000000000, 1704067200000]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stream", "s"], "--stream S takes the serdes of the job's stream S: give the job with --config"),
        (
            ["t", "--null-value", "NULL"],
            "a tombstone (--null-value NULL) needs a key: give --key or --key-separator",
        ),
        (["t", "--key", "k", "--key-field", "user"], "give one of --key-field, --key and --key-separator"),
        (
            ["t", "--serde", "string", "--timestamp-field", "ts"],
            "--timestamp-field reads a field of a JSON value",
        ),
    ],
)
def test_produce_refusals_name_the_option(broker: str, args: list[str], message: str) -> None:
    result = _cli("produce", "--bootstrap", broker, "--partitions", "1", *args, input="NULL\n")
    assert result.exit_code == 2
    assert message in result.stderr

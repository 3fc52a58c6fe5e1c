"""``samzapy produce`` and ``samzapy consume`` on the real dev broker (issue 16 item 4)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.cli import main
from samzapy.kafka.partitioner import partition_for_key

pytestmark = pytest.mark.integration


def _cli(*args: str, input: str | None = None):  # noqa: A002 - click's name
    return CliRunner().invoke(main, list(args), input=input)


def test_produce_consume_round_trip_of_10k_json_records(broker: str, topic_name: str, tmp_path: Path) -> None:
    records = [{"user": f"user-{i % 97}", "n": i, "page": f"/p/{i % 13}"} for i in range(10_000)]
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in records))

    produced = _cli(
        "produce", topic_name, "--bootstrap", broker, "--file", str(lines), "--key-field", "user",
        "--partitions", "4", "--header", "source=test", "--header", "batch=7",
    )  # fmt: skip
    assert produced.exit_code == 0, produced.output
    assert f"produced 10000 records to '{topic_name}'" in produced.stderr

    consumed = _cli(
        "consume", topic_name, "--bootstrap", broker, "--from-beginning", "--format", "json", "--headers"
    )
    assert consumed.exit_code == 0, consumed.output
    rows = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert len(rows) == 10_000
    assert consumed.stderr.strip().startswith(f"10000 records from '{topic_name}'")
    by_partition: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        assert row["topic"] == topic_name
        assert row["key"] == row["value"]["user"]
        assert row["partition"] == partition_for_key(row["key"].encode(), 4)
        assert row["headers"] == {"source": "test", "batch": "7"}
        by_partition[row["partition"]].append(row["offset"])
    assert set(by_partition) == {0, 1, 2, 3}
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # every partition read whole, in order
    assert sorted((r["value"] for r in rows), key=lambda v: v["n"]) == records


def test_consume_text_format_and_max(broker: str, topic_name: str) -> None:
    lines = "".join(f"word-{i}\n" for i in range(5))
    produced = _cli(
        "produce", topic_name, "--bootstrap", broker, "--serde", "string", "--key", "k", "--partitions", "1",
        input=lines,
    )  # fmt: skip
    assert produced.exit_code == 0, produced.output
    consumed = _cli("consume", topic_name, "--bootstrap", broker, "--from-beginning", "--max", "3")
    assert consumed.exit_code == 0, consumed.output
    assert consumed.stdout.splitlines() == ["0:0\tk\tword-0", "0:1\tk\tword-1", "0:2\tk\tword-2"]


def test_consume_follow_stops_at_max(broker: str, topic_name: str) -> None:
    _cli("produce", topic_name, "--bootstrap", broker, "--partitions", "2", "--key-field", "k",
         input='{"k": "a"}\n{"k": "b"}\n{"k": "c"}\n')  # fmt: skip
    consumed = _cli(
        "consume", topic_name, "--bootstrap", broker, "--from-beginning", "--follow", "--max", "3"
    )
    assert consumed.exit_code == 0, consumed.output
    assert sorted(line.split("\t")[1] for line in consumed.stdout.splitlines()) == ["a", "b", "c"]


def test_consume_from_the_end_prints_nothing_and_says_so(broker: str, topic_name: str) -> None:
    _cli("produce", topic_name, "--bootstrap", broker, "--partitions", "1", input='{"a": 1}\n')
    consumed = _cli("consume", topic_name, "--bootstrap", broker)
    assert consumed.exit_code == 0
    assert consumed.stdout == ""
    assert "0 records" in consumed.stderr and "add --from-beginning" in consumed.stderr


def test_produce_to_a_missing_topic_without_partitions_is_exit_2(broker: str, topic_name: str) -> None:
    result = _cli("produce", topic_name, "--bootstrap", broker, input='{"a": 1}\n')
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: topic '{topic_name}' does not exist on {broker}: add --partitions N to create it\n"
    )


def test_produce_refuses_a_line_that_is_not_json_with_its_number(broker: str, topic_name: str) -> None:
    result = _cli("produce", topic_name, "--bootstrap", broker, "--partitions", "1",
                  input='{"a": 1}\n\nnot json\n')  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: line 3 of stdin cannot be sent with --serde json: ")
    assert result.stderr.endswith(f"(1 records before it were sent to '{topic_name}')\n")


def test_produce_key_field_missing_names_the_fields(broker: str, topic_name: str) -> None:
    result = _cli("produce", topic_name, "--bootstrap", broker, "--partitions", "1", "--key-field", "user",
                  input='{"name": "ann"}\n')  # fmt: skip
    assert result.exit_code == 2
    assert "line 1 of stdin cannot be sent with --serde json: no field 'user' for the key (fields: name)" in (
        result.stderr
    )


def test_consume_a_missing_topic_is_exit_1_and_suggests_produce(broker: str, topic_name: str) -> None:
    result = _cli("consume", topic_name, "--bootstrap", broker, "--from-beginning")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: topic '{topic_name}' does not exist on {broker}; "
        f"create it with: samzapy produce {topic_name} --partitions N\n"
    )


def test_bootstrap_from_the_jobs_config_path(broker: str, topic_name: str, tmp_path: Path) -> None:
    config = tmp_path / "job.properties"
    config.write_text(f"job.name=j\nsystems.kafka.producer.bootstrap.servers={broker}\n"
                      f"systems.kafka.consumer.bootstrap.servers={broker}\n")  # fmt: skip
    produced = _cli("produce", topic_name, "--config-path", str(config), "--partitions", "1", input='"x"\n')
    assert produced.exit_code == 0, produced.output
    consumed = _cli("consume", topic_name, "--config-path", str(config), "--from-beginning")
    assert consumed.stdout == "0:0\tnull\tx\n"


def test_bootstrap_and_config_path_together_are_a_usage_error(tmp_path: Path) -> None:
    result = _cli("consume", "t", "--bootstrap", "x:1", "--config-path", str(tmp_path / "j.properties"))
    assert result.exit_code == 2
    assert "give --bootstrap or --config-path, not both" in result.stderr

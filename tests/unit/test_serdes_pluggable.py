"""Pluggable serdes (issue 16 item 6): serializers.registry.NAME.class=module:Class."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from samzapy.config import Config, ConfigError, parse_job_config, parse_properties
from samzapy.serdes import SerdeResolver
from samzapy.task import InitableTask, StreamTask
from samzapy.testing import TaskHarness

CSV_MODULE = '''
class CsvSerde:
    """Lists of strings as one line of comma-separated text."""

    def to_bytes(self, obj):
        return ",".join(obj).encode()

    def from_bytes(self, data):
        return data.decode().split(",")


class NotASerde:
    def to_bytes(self, obj):
        return b""
'''

BASE = "job.name=j\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.a\n"


@pytest.fixture
def csv_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "csvserde_mod.py").write_text(CSV_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "csvserde_mod"
    sys.modules.pop("csvserde_mod", None)


def _parse(text: str, **kwargs):
    config = Config(parse_properties(BASE + text, "job.properties"), source="job.properties")
    return parse_job_config(config, **kwargs)


def test_a_users_serde_class_serialises_a_stream_and_a_store(csv_module: str) -> None:
    job = _parse(
        f"serializers.registry.csv.class={csv_module}:CsvSerde\n"
        "systems.kafka.streams.a.samza.msg.serde=csv\n"
        "stores.s.factory=inmemory\nstores.s.key.serde=string\nstores.s.msg.serde=csv\n",
    )
    serde = SerdeResolver(job).get("csv")
    assert serde.to_bytes(["a", "b"]) == b"a,b" and serde.from_bytes(b"x,y") == ["x", "y"]
    assert job.serializers["csv"].custom


class _Keeps(StreamTask, InitableTask):
    def init(self, context):
        self.store = context.get_store("s")

    def process(self, envelope, collector, coordinator):
        self.store.put(envelope.key, envelope.message)


def test_a_users_serde_works_in_the_harness(csv_module: str) -> None:
    config = {
        "serializers.registry.csv.class": f"{csv_module}:CsvSerde",
        "stores.s.factory": "inmemory",
        "stores.s.changelog": "kafka.s-changelog",
        "stores.s.key.serde": "string",
        "stores.s.msg.serde": "csv",
    }
    harness = TaskHarness(_Keeps, config)
    harness.send("kafka.input", "k", ["a", "b"])
    harness.commit()
    assert harness.changelogs["s"].latest() == {b"k": b"a,b"}
    harness.close()


def test_a_class_that_is_not_a_serde_is_one_clear_error(csv_module: str) -> None:
    with pytest.raises(ConfigError) as info:
        _parse(f"serializers.registry.csv.class={csv_module}:NotASerde\n", check_task_class=True)
    assert info.value.problems == [
        f"'serializers.registry.csv.class' = '{csv_module}:NotASerde' (job.properties:4): not a serde: "
        "it has no from_bytes. A serde is a class whose instances have to_bytes(obj) -> bytes and "
        "from_bytes(data) -> object (docs/configuration.md, 'Your own serde')"
    ]


def test_a_missing_serde_class_suggests_the_closest_name(csv_module: str) -> None:
    with pytest.raises(ConfigError) as info:
        _parse(f"serializers.registry.csv.class={csv_module}:CsvSerd\n", check_task_class=True)
    assert info.value.problems[0].endswith("has no attribute 'CsvSerd'; did you mean 'CsvSerde'?")


def test_an_unknown_samza_serde_class_is_one_error_not_two() -> None:
    with pytest.raises(ConfigError) as info:
        _parse(
            "serializers.registry.kryo.class=org.apache.samza.serializers.KryoSerdeFactory\n"
            "stores.s.factory=inmemory\nstores.s.msg.serde=kryo\n"
        )
    [problem] = info.value.problems
    assert problem.startswith(
        "Invalid value 'org.apache.samza.serializers.KryoSerdeFactory' for "
        "'serializers.registry.kryo.class' (job.properties:4): must be a serde kind (string, json, "
        "integer, long, bytes, avro), one of Samza's serde factories samzapy has a counterpart for ("
    )
    assert problem.endswith(
        "or your own Python serde as module:Class (docs/configuration.md, 'Your own serde')"
    )

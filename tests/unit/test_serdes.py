"""Serdes: round trips, Samza's byte layouts, error messages, Avro schema evolution."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from samzapy.config.model import JobConfig, SerdeSpec, StoreConfig, StreamConfig
from samzapy.errors import SerdeError
from samzapy.serdes import (
    AvroSerde,
    BytesSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    Serde,
    SerdeResolver,
    StringSerde,
    build_serde,
)
from samzapy.streams import SystemStream

USER_V1 = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
USER_V2 = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "zip", "type": "string", "default": "00000"},
    ],
}


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (StringSerde(), "héllo wörld ✓"),
        (StringSerde(), ""),
        (JsonSerde(), {"a": [1, 2.5, None, True], "b": {"c": "d"}}),
        (JsonSerde(sort_keys=True), {"z": 1, "a": 2}),
        (JsonSerde(), "just a string"),
        (IntegerSerde(), 0),
        (IntegerSerde(), -(2**31)),
        (IntegerSerde(), 2**31 - 1),
        (LongSerde(), -(2**63)),
        (LongSerde(), 2**63 - 1),
        (BytesSerde(), b"\x00\xffraw"),
        (AvroSerde(USER_V1), {"id": 7, "name": "ann"}),
    ],
)
def test_round_trip_returns_an_equal_value(serde: Serde, value: object) -> None:
    assert serde.from_bytes(serde.to_bytes(value)) == value


def test_every_serde_satisfies_the_protocol() -> None:
    for serde in (StringSerde(), JsonSerde(), IntegerSerde(), LongSerde(), BytesSerde(), AvroSerde(USER_V1)):
        assert isinstance(serde, Serde)


def test_integer_and_long_use_samzas_big_endian_layout() -> None:
    assert IntegerSerde().to_bytes(1) == b"\x00\x00\x00\x01"
    assert IntegerSerde().to_bytes(-1) == b"\xff\xff\xff\xff"
    assert IntegerSerde().to_bytes(0x01020304) == b"\x01\x02\x03\x04"
    assert LongSerde().to_bytes(1) == b"\x00" * 7 + b"\x01"
    assert LongSerde().to_bytes(-2) == b"\xff" * 7 + b"\xfe"


def test_string_is_utf8() -> None:
    assert StringSerde().to_bytes("é") == b"\xc3\xa9"


def test_json_is_compact_and_deterministic() -> None:
    serde = JsonSerde()
    value = {"user": "ann", "n": 2, "tags": ["x"]}
    assert serde.to_bytes(value) == b'{"user":"ann","n":2,"tags":["x"]}'
    assert serde.to_bytes(value) == serde.to_bytes(dict(value))


def test_json_sort_keys_makes_key_order_irrelevant() -> None:
    sorted_serde = JsonSerde(sort_keys=True)
    assert (
        sorted_serde.to_bytes({"b": 1, "a": 2}) == sorted_serde.to_bytes({"a": 2, "b": 1}) == b'{"a":2,"b":1}'
    )
    assert JsonSerde().to_bytes({"b": 1, "a": 2}) == b'{"b":1,"a":2}'


def test_json_writes_non_string_keys_as_strings() -> None:
    assert JsonSerde().from_bytes(JsonSerde().to_bytes({1: "x"})) == {"1": "x"}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: IntegerSerde().from_bytes(b"\x00\x00\x01"), "IntegerSerde expects 4 bytes, got 3"),
        (lambda: LongSerde().from_bytes(b"\x00" * 4), "LongSerde expects 8 bytes, got 4"),
        (lambda: IntegerSerde().to_bytes(2**31), "IntegerSerde cannot hold 2147483648"),
        (lambda: IntegerSerde().to_bytes("1"), "IntegerSerde expects an int, got str"),
        (lambda: LongSerde().to_bytes(True), "LongSerde expects an int, got bool"),
        (lambda: StringSerde().to_bytes(5), "StringSerde expects a str, got int"),
        (lambda: StringSerde().from_bytes(b"\xff\xfe"), "StringSerde expects UTF-8 bytes"),
        (lambda: JsonSerde().from_bytes(b"{not json"), "JsonSerde expects JSON"),
        (lambda: JsonSerde().to_bytes({"s": {1, 2}}), "JsonSerde cannot serialise dict"),
        (lambda: BytesSerde().to_bytes("text"), "BytesSerde expects bytes, got str"),
        (lambda: AvroSerde(USER_V1).to_bytes({"id": "x", "name": "a"}), "AvroSerde cannot write"),
        (lambda: AvroSerde(USER_V1).to_bytes({"id": 1, "name": "a", "extra": 1}), "more fields"),
        (lambda: AvroSerde(USER_V1).from_bytes(b"\x02"), "AvroSerde cannot read"),
    ],
)
def test_failures_raise_serde_error_naming_the_serde_and_problem(call, expected: str) -> None:
    with pytest.raises(SerdeError, match=expected):
        call()


def test_avro_layout_is_schemaless_binary() -> None:
    # long 7 -> zigzag 14 (0x0e); string "ann" -> length 3 zigzag 6 then the bytes
    assert AvroSerde(USER_V1).to_bytes({"id": 7, "name": "ann"}) == b"\x0e\x06ann"


def test_avro_rejects_trailing_bytes_from_another_schema() -> None:
    data = AvroSerde(USER_V1).to_bytes({"id": 7, "name": "ann"}) + b"\x00"
    with pytest.raises(SerdeError, match="read 5 of 6 bytes"):
        AvroSerde(USER_V1).from_bytes(data)


def _write_schema(tmp_path: Path, name: str, schema: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(schema))
    return path


def test_avro_reader_schema_evolves_old_records(tmp_path: Path) -> None:
    v1 = _write_schema(tmp_path, "user-v1.avsc", USER_V1)
    v2 = _write_schema(tmp_path, "user-v2.avsc", USER_V2)
    data = AvroSerde(v1).to_bytes({"id": 3, "name": "bob"})
    assert AvroSerde(v1, v2).from_bytes(data) == {"id": 3, "zip": "00000"}


def test_avro_schema_file_problems_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SerdeError, match="cannot read its writer schema file .*missing.avsc"):
        AvroSerde(tmp_path / "missing.avsc")
    bad_json = tmp_path / "bad.avsc"
    bad_json.write_text("{")
    with pytest.raises(SerdeError, match="bad.avsc' is not valid JSON"):
        AvroSerde(bad_json)
    bad_schema = _write_schema(
        tmp_path, "odd.avsc", {"type": "record", "name": "X", "fields": [{"name": "a"}]}
    )
    with pytest.raises(SerdeError, match="odd.avsc' is not a valid Avro schema"):
        AvroSerde(bad_schema)


def test_build_serde_builds_every_kind(tmp_path: Path) -> None:
    schema = _write_schema(tmp_path, "u.avsc", USER_V1)
    kinds = {
        "string": StringSerde,
        "json": JsonSerde,
        "integer": IntegerSerde,
        "long": LongSerde,
        "bytes": BytesSerde,
    }
    for kind, cls in kinds.items():
        assert isinstance(build_serde(SerdeSpec(name="x", kind=kind)), cls)
    assert isinstance(build_serde(SerdeSpec(name="u", kind="avro", schema_path=schema)), AvroSerde)


def test_build_serde_errors_name_the_serde() -> None:
    with pytest.raises(SerdeError, match="serde 'u' is an Avro serde but has no schema"):
        build_serde(SerdeSpec(name="u", kind="avro"))
    with pytest.raises(SerdeError, match="serde 'q' has unknown kind 'pickle'"):
        build_serde(SerdeSpec(name="q", kind="pickle"))


def _job(tmp_path: Path) -> JobConfig:
    pageviews = SystemStream("kafka", "pageviews")
    return JobConfig(
        job_name="j",
        system_key_serde="string",
        system_msg_serde="json",
        streams={pageviews: StreamConfig(pageviews, msg_serde="user")},
        serializers={
            "user": SerdeSpec("user", "avro", schema_path=_write_schema(tmp_path, "u.avsc", USER_V1)),
            "string": SerdeSpec("string", "bytes"),  # a registered name overrides the built-in one
        },
    )


def test_resolver_builds_builtins_and_registered_serdes_once(tmp_path: Path) -> None:
    resolver = SerdeResolver(_job(tmp_path))
    assert resolver.get(None) is None
    assert isinstance(resolver.get("long"), LongSerde)
    assert isinstance(resolver.get("user"), AvroSerde)
    assert isinstance(resolver.get("string"), BytesSerde)
    assert resolver.get("user") is resolver.get("user")


def test_resolver_applies_system_defaults_to_streams(tmp_path: Path) -> None:
    resolver = SerdeResolver(_job(tmp_path))
    key, msg = resolver.for_stream(SystemStream("kafka", "pageviews"))
    assert isinstance(key, BytesSerde) and isinstance(msg, AvroSerde)
    key, msg = resolver.for_stream(SystemStream("kafka", "other"))
    assert isinstance(key, BytesSerde) and isinstance(msg, JsonSerde)


def test_resolver_for_store(tmp_path: Path) -> None:
    resolver = SerdeResolver(_job(tmp_path))
    key, msg = resolver.for_store(StoreConfig("counts", key_serde="integer", msg_serde=None))
    assert isinstance(key, IntegerSerde) and msg is None


def test_resolver_unknown_name_lists_what_exists(tmp_path: Path) -> None:
    with pytest.raises(SerdeError, match="no serde named 'strng'.*serializers.registry.strng.class.*string"):
        SerdeResolver(_job(tmp_path)).get("strng")


def test_json_bytes_hold_no_more_memory_than_their_length() -> None:
    # orjson 3.13 returns its 4 KiB write buffer as the bytes object; kept by the thousand
    # (a commit's coalesced changelog values) that was 4 KiB per small value.
    serde = JsonSerde()
    tracemalloc.start()
    try:
        kept = [serde.to_bytes({"user": f"u{i}", "count": i}) for i in range(1000)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 1000 and held < 1000 * 200

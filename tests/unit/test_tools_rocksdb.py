"""read-rocksdb-tool and RocksDbKeyValueReader on real RocksDB stores built with the job's own
store code (no broker: the stores are not logged)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from samzapy.config import load_config, parse_job_config
from samzapy.metrics import MetricsGroup
from samzapy.serdes import SerdeResolver
from samzapy.stores.factory import build_store
from samzapy.tools.read_rocksdb import main as tool
from samzapy.tools.reader import RocksDbKeyValueReader

AVRO_SCHEMA = {
    "type": "record",
    "name": "View",
    "fields": [{"name": "user", "type": "string"}, {"name": "n", "type": "long"}],
}

# store -> (key serde, msg serde, entries)
STORES: dict[str, tuple[str, str, dict[Any, Any]]] = {
    "strings": ("string", "json", {"a": {"n": 1}, "ab": {"n": 2}, "b": [1, 2], "c": "text"}),
    "ints": ("integer", "long", {-1: 10, 7: 70, 300: 3000}),
    "longs": ("long", "string", {2**40: "big", 5: "five"}),
    "jsons": ("json", "integer", {'{"id":1}': 1, '["x",2]': 2}),  # keys given as JSON text
    "raw": ("bytes", "bytes", {b"\x00\x01": b"\xff\xfe", b"k": b"v"}),
    "avros": ("string", "view", {"ann": {"user": "ann", "n": 3}}),
}


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SAMZAPY_HOME per test: the cache note is said once per store and home."""
    monkeypatch.setenv("SAMZAPY_HOME", str(tmp_path / "home"))


def _key(store: str, key: Any) -> Any:
    return json.loads(key) if store == "jsons" else key


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config with one store per serde pair, and the stores written under base/."""
    root = tmp_path_factory.mktemp("rocksdb-tool")
    (root / "view.avsc").write_text(json.dumps(AVRO_SCHEMA))
    lines = [
        "job.name=tool-test",
        "task.class=tools_tasks:KeyValueTask",
        "task.inputs=kafka.in",
        "serializers.registry.view.class=org.apache.samza.serializers.AvroSerdeFactory",
        "serializers.registry.view.schema=view.avsc",
        f"job.logged.store.base.dir={root / 'base'}",
    ]
    for name, (key_serde, msg_serde, _) in STORES.items():
        lines += [
            f"stores.{name}.factory=org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
            f"stores.{name}.key.serde={key_serde}",
            f"stores.{name}.msg.serde={msg_serde}",
        ]
    lines += ["stores.jsons.object.cache.size=0"]  # dict keys cannot be cached (unhashable)
    lines += ["stores.ttl.factory=rocksdb", "stores.ttl.key.serde=string", "stores.ttl.msg.serde=string"]
    lines += ["stores.ttl.rocksdb.ttl.ms=3600000"]
    (root / "job.properties").write_text("\n".join(lines) + "\n")
    config = load_config(root / "job.properties")
    job = parse_job_config(config)
    serdes = SerdeResolver(job)
    contents = {name: entries for name, (_, _, entries) in STORES.items()} | {"ttl": {"t": "ttl value"}}
    for name, entries in contents.items():
        _write(job.stores[name], root / "base", serdes, [(_key(name, k), v) for k, v in entries.items()], 0)
    # a second partition of "strings"
    _write(job.stores["strings"], root / "base", serdes, [("p1-key", {"n": 99})], 1)
    return root


def _write(store_config: Any, base: Path, serdes: SerdeResolver, entries: list, partition: int) -> None:
    key_serde, msg_serde = serdes.for_store(store_config)
    store = build_store(
        store_config,
        partition=partition,
        base_dir=base,
        key_serde=key_serde,
        msg_serde=msg_serde,
        changelog=None,
        metrics=MetricsGroup("t"),
    )
    store.put_all(entries)
    store.close()


def run(job_dir: Path, *args: str) -> Any:
    base = ["--config-path", str(job_dir / "job.properties"), "--db-path", str(job_dir / "base")]
    command, rest = args[0], args[1:]
    return CliRunner().invoke(tool, [command, *base, *rest])


@pytest.mark.parametrize(
    ("store", "option", "given", "expected_text"),
    [
        ("strings", "--string-key", "a,b,zz", ['"a": {"n":1}', '"b": [1,2]', '"zz": <missing>']),
        ("ints", "--integer-key", "-1,300,8", ["-1: 10", "300: 3000", "8: <missing>"]),
        ("longs", "--long-key", f"{2**40},6", [f'{2**40}: "big"', "6: <missing>"]),
        ("jsons", "--json-key", '{"id":1}', ['{"id":1}: 1']),
        (
            "raw",
            "--hex-key",
            "0001,6b,ff",
            ["b'\\x00\\x01': b'\\xff\\xfe'", "b'k': b'v'", "b'\\xff': <missing>"],
        ),
        ("avros", "--string-key", "ann", ['"ann": {"user":"ann","n":3}']),
        ("ttl", "--string-key", "t", ['"t": "ttl value"']),
    ],
)
def test_inspect_decodes_each_key_type_and_serde(job_dir, store, option, given, expected_text):
    result = run(job_dir, "inspect", "--db-name", store, "--partition", "0", option, given)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == expected_text


def test_inspect_json_format_one_object_per_line_missing_is_null(job_dir):
    result = run(job_dir, "inspect", "--db-name", "strings", "--string-key", "a,nope", "--format", "json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == [
        {"key": "a", "value": {"n": 1}, "partition": 0},
        {"key": "nope", "value": None, "partition": None},
    ]


def test_inspect_json_shows_bytes_as_marked_base64(job_dir):
    result = run(job_dir, "inspect", "--db-name", "raw", "--hex-key", "0001", "--format", "json", "-q")
    assert json.loads(result.stdout) == {
        "key": {"$base64": "AAE="},
        "value": {"$base64": "//4="},
        "partition": 0,
    }


def test_inspect_searches_every_partition_and_names_the_one_found(job_dir):
    result = run(job_dir, "inspect", "--db-name", "strings", "--string-key", "p1-key,a")
    assert result.stdout.splitlines() == ['"p1-key": {"n":99} (partition 1)', '"a": {"n":1} (partition 0)']
    only0 = run(job_dir, "inspect", "--db-name", "strings", "--partition", "0", "--string-key", "p1-key")
    assert only0.stdout.strip() == '"p1-key": <missing>'


def test_inspect_prints_the_cache_note_on_stderr(job_dir):
    result = run(job_dir, "inspect", "--db-name", "strings", "--string-key", "a")
    assert "object.cache.size=0" in result.stderr and "secondary instance" in result.stderr
    assert "secondary" not in result.stdout


def test_db_path_may_be_the_store_dir_or_a_partition_dir(job_dir):
    config = str(job_dir / "job.properties")
    for db_path in (job_dir / "base" / "ints", job_dir / "base" / "ints" / "Partition_0"):
        result = CliRunner().invoke(
            tool,
            [
                "inspect",
                f"--config-path=file://{config}",
                f"--db-path={db_path}",
                "--db-name=ints",
                "--integer-key=7",
            ],
        )
        assert result.stdout.strip() == "7: 70", result.output


def test_scan_json_names_the_partition_of_each_entry(job_dir):
    result = run(job_dir, "scan", "--db-name", "strings", "-q", "--format", "json")
    assert result.exit_code == 0, result.output
    entries = [orjson.loads(line) for line in result.stdout.splitlines()]
    found = {e["key"]: e["partition"] for e in entries}
    assert found == {"a": 0, "ab": 0, "b": 0, "c": 0, "p1-key": 1}


def test_scan_orders_keys_and_applies_from_to_prefix_limit(job_dir):
    def keys(*args: str) -> list[str]:
        result = run(job_dir, "scan", "--db-name", "strings", "-q", *args)
        assert result.exit_code == 0, result.output
        return [line.split(":")[0] for line in result.stdout.splitlines()]

    assert keys() == ['"a"', '"ab"', '"b"', '"c"', '"p1-key"']  # merged over both partitions
    lines = run(job_dir, "scan", "--db-name", "strings", "-q").stdout.splitlines()
    assert lines[0].endswith(" (partition 0)") and lines[-1].endswith(" (partition 1)"), lines
    assert keys("--prefix", "a") == ['"a"', '"ab"']
    assert keys("--from", "ab", "--to", "c") == ['"ab"', '"b"']
    assert keys("--limit", "2") == ['"a"', '"ab"']
    assert keys("--partition", "1") == ['"p1-key"']
    ints = run(job_dir, "scan", "--db-name", "ints", "--from", "0", "--format", "json", "-q")
    # serialised-key order: a negative int's big-endian two's complement sorts after the positives
    assert [json.loads(line)["key"] for line in ints.stdout.splitlines()] == [7, 300, -1]


def test_count_is_exact_and_takes_ranges(job_dir):
    assert run(job_dir, "count", "--db-name", "strings", "-q").stdout.strip() == "5"
    assert run(job_dir, "count", "--db-name", "strings", "--prefix", "a", "-q").stdout.strip() == "2"
    assert (
        run(job_dir, "count", "--db-name", "raw", "--key-type", "hex", "--from", "01", "-q").stdout.strip()
        == "1"
    )


def test_stats_reports_keys_files_and_no_offset_for_an_unlogged_store(job_dir):
    result = run(job_dir, "stats", "--db-name", "ints", "--format", "json", "-q")
    (stats,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert stats["partition"] == 0 and stats["estimated_keys"] == 3
    assert stats["size_bytes"] > 0 and stats["changelog_offset"] is None and stats["live"] is False
    text = run(job_dir, "stats", "--db-name", "ints", "-q").stdout
    assert "keys (estimate)   3" in text and "in use by a job   no" in text


def test_reader_returns_deserialised_values_and_reads_an_open_store(job_dir, tmp_path):
    with RocksDbKeyValueReader("ints", job_dir / "base", job_dir / "job.properties") as reader:
        assert reader.get(300) == 3000 and reader.get(1) is None
        assert reader.get_all([7, 8]) == {7: 70}
        assert list(reader.scan(from_key=0, to_key=1000)) == [(7, 70), (300, 3000)]
    # a store held open read-write (a live job's, memtable not flushed) is read without its lock
    config = parse_job_config(load_config(job_dir / "job.properties"))
    key_serde, msg_serde = SerdeResolver(config).for_store(config.stores["longs"])
    live = build_store(
        config.stores["longs"],
        partition=0,
        base_dir=tmp_path,
        key_serde=key_serde,
        msg_serde=msg_serde,
        changelog=None,
        metrics=MetricsGroup("t"),
    )
    try:
        live.put(1, "one")
        live.put(2, "two")
        live.flush()  # what the job does at commit: until then the puts sit in the object cache
        with RocksDbKeyValueReader("longs", tmp_path, config) as reader:
            assert reader.get(1) == "one"
            live.put(3, "three")
            live.flush()
            assert reader.get(3) is None  # written after the reader's last catch-up
            reader.catch_up()
            assert reader.get(3) == "three"
            assert reader.stats()[0].live is True
        live.put(4, "four")  # the job's store is unharmed
        assert live.get(4) == "four"
    finally:
        live.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "--db-name", "nope", "--string-key", "a"], "store 'nope' is not in the config"),
        (["inspect", "--string-key", "a"], "name one with --db-name"),
        (
            ["inspect", "--db-name", "ints", "--integer-key", "abc"],
            "key 'abc' is not an integer (--integer-key)",
        ),
        (["inspect", "--db-name", "ints", "--integer-key", "9999999999"], "does not fit in a signed 32-bit"),
        (["inspect", "--db-name", "ints", "--string-key", "x"], "does not fit the key serde 'integer'"),
        (["inspect", "--db-name", "jsons", "--json-key", "{bad"], "is not valid JSON (--json-key)"),
        (["inspect", "--db-name", "raw", "--hex-key", "zz"], "is not hexadecimal bytes"),
        (["inspect", "--db-name", "ints"], "give at least one key"),
        (["inspect", "--db-name", "ints", "--partition", "5", "--integer-key", "1"], "has no partition 5"),
        (["scan", "--db-name", "ints", "--from", "x"], "key 'x' is not an integer"),
    ],
)
def test_bad_input_exits_2_with_a_one_line_message(job_dir, args, message):
    result = run(job_dir, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_a_directory_that_is_not_a_rocksdb_store_exits_2(job_dir, tmp_path):
    config = str(job_dir / "job.properties")
    (tmp_path / "empty").mkdir()
    garbage = tmp_path / "ints" / "Partition_0"
    garbage.mkdir(parents=True)
    (garbage / "CURRENT").write_text("not a manifest\n")
    cases = [
        (tmp_path / "empty", "is not a RocksDB store"),
        (tmp_path / "missing", "is not a directory"),
        (tmp_path, "is not a readable RocksDB store"),
    ]
    for db_path, message in cases:
        result = CliRunner().invoke(
            tool, ["count", "--config-path", config, "--db-path", str(db_path), "--db-name", "ints"]
        )
        assert result.exit_code == 2, result.output
        assert message in result.stderr and result.stderr.count("\n") == 1


def test_a_bad_config_path_exits_2(tmp_path):
    result = CliRunner().invoke(
        tool, ["count", "--config-path", str(tmp_path / "no.properties"), "--db-path", str(tmp_path)]
    )
    assert result.exit_code == 2 and "does not exist" in result.stderr

"""parse_job_config: the typed job view, and every problem reported with key, value and place."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from samzapy.config import (
    Config,
    ConfigError,
    JobConfig,
    ReporterSpec,
    StoreConfig,
    StreamConfig,
    load_config,
    parse_job_config,
)
from samzapy.config.keys import KEYS, find_spec
from samzapy.streams import SystemStream

BASE = "job.name=counter\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.pageviews\n"
SEED_002 = """\
stores.my-store.factory=org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory
stores.my-store.changelog=kafka.my-store-changelog
serializers.registry.string.class=org.apache.samza.serializers.StringSerdeFactory
stores.my-store.key.serde=string
stores.my-store.msg.serde=string
"""
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def write(tmp_path: Path):
    def write(text: str, name: str = "job.properties") -> Path:
        file = tmp_path / name
        file.write_text(text)
        return file

    return write


def parse(file: Path, overrides: tuple[str, ...] = ()) -> JobConfig:
    return parse_job_config(load_config(file, overrides))


def problems(file: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(file)
    return info.value.problems


def test_seed_002_lines_load(write) -> None:
    job = parse(write(BASE + SEED_002))
    store = job.stores["my-store"]
    assert store == StoreConfig(
        "my-store",
        engine="rocksdb",
        key_serde="string",
        msg_serde="string",
        changelog=SystemStream("kafka", "my-store-changelog"),
    )
    assert store.logged
    assert job.serializers["string"].kind == "string"


def test_minimal_job_takes_model_defaults(write) -> None:
    job = parse(write(BASE))
    assert job == JobConfig(
        job_name="counter",
        task_class="samzapy.task:StreamTask",
        inputs=(SystemStream("kafka", "pageviews"),),
        serializers=job.serializers,
    )
    assert set(job.serializers) == {"string", "json", "integer", "long", "bytes"}


def test_full_job(write, tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "view.avsc").write_text(
        json.dumps({"type": "record", "name": "View", "fields": [{"name": "user", "type": "string"}]})
    )
    text = (
        BASE.replace("kafka.pageviews", "kafka.pageviews, kafka.profiles")
        + """
job.id=7
job.container.count=3
job.logged.store.base.dir=/var/state
job.default.system=kafka
task.window.ms=1000
task.commit.ms=5000
task.max.concurrency=4
task.drop.deserialization.errors=true
task.dead.letter.stream=kafka.dlq
task.ignored.exceptions=ValueError, mypkg.Bad
task.callback.timeout.ms=3000
task.retry.max.attempts=2
task.retry.backoff.ms=50
systems.kafka.samza.factory=org.apache.samza.system.kafka.KafkaSystemFactory
systems.kafka.consumer.bootstrap.servers=embedded
systems.kafka.consumer.max.poll.records=500
systems.kafka.producer.linger.ms=5
systems.kafka.default.stream.replication.factor=3
systems.kafka.default.stream.partitions=8
systems.kafka.samza.key.serde=string
systems.kafka.samza.msg.serde=json
systems.kafka.streams.profiles.samza.bootstrap=true
systems.kafka.streams.profiles.samza.priority=2
systems.kafka.streams.profiles.samza.offset.default=oldest
systems.kafka.streams.profiles.samza.msg.serde=view
systems.kafka.streams.out.put.partitions=4
serializers.registry.view.class=org.apache.samza.serializers.AvroSerdeFactory
serializers.registry.view.schema=schemas/view.avsc
stores.s.factory=inmemory
stores.s.changelog=s-log
stores.s.object.cache.size=0
stores.s.write.batch.size=10
stores.s.container.cache.size.bytes=1000
stores.s.container.write.buffer.size.bytes=2000
stores.s.rocksdb.compression=ZSTD
stores.s.rocksdb.block.size.bytes=8192
stores.s.rocksdb.ttl.ms=60000
stores.s.restore.engine=spark
metrics.reporters=snapshot
metrics.reporter.snapshot.stream=kafka.metrics
"""
    )
    job = parse(write(text))
    assert job.job_id == "7" and job.container_count == 3
    assert job.logged_store_base_dir == Path("/var/state")
    assert job.inputs == (SystemStream("kafka", "pageviews"), SystemStream("kafka", "profiles"))
    assert (job.window_ms, job.commit_ms, job.max_concurrency) == (1000, 5000, 4)
    assert job.drop_deserialization_errors and job.dead_letter_stream == SystemStream("kafka", "dlq")
    assert job.ignored_exceptions == ("ValueError", "mypkg.Bad")
    assert (job.callback_timeout_ms, job.retry_max_attempts, job.retry_backoff_ms) == (3000, 2, 50)
    assert job.consumer_bootstrap_servers == job.producer_bootstrap_servers == "embedded"
    assert job.consumer_overrides == {"max_poll_records": "500"}
    assert job.producer_overrides == {"linger_ms": "5"}
    assert (job.replication_factor, job.default_partitions) == (3, 8)
    profiles = SystemStream("kafka", "profiles")
    assert job.stream(profiles) == StreamConfig(profiles, "string", "view", True, 2, "oldest", None)
    assert job.streams[SystemStream("kafka", "out.put")].partitions == 4
    assert job.serializers["view"].schema_path == tmp_path / "schemas" / "view.avsc"
    assert job.stores["s"] == StoreConfig(
        name="s",
        engine="inmemory",
        changelog=SystemStream("kafka", "s-log"),
        object_cache_size=0,
        write_batch_size=10,
        cache_size_bytes=1000,
        write_buffer_size_bytes=2000,
        compression="zstd",
        block_size_bytes=8192,
        ttl_ms=60000,
        restore_engine="spark",
    )


def test_relative_store_dir_stays_relative_to_the_working_directory(write) -> None:
    job = parse(write(BASE + "job.logged.store.base.dir=data/state\n"))
    assert job.logged_store_base_dir == Path("data/state")


@pytest.mark.parametrize(
    ("consumer", "producer", "expected"),
    [
        (None, None, ("localhost:9092", "localhost:9092")),
        ("a:1", None, ("a:1", "a:1")),
        (None, "b:2", ("b:2", "b:2")),
        ("a:1,b:2", "c:3", ("a:1,b:2", "c:3")),
    ],
)
def test_bootstrap_servers_fill_each_other(write, consumer, producer, expected) -> None:
    text = BASE
    if consumer:
        text += f"systems.kafka.consumer.bootstrap.servers={consumer}\n"
    if producer:
        text += f"systems.kafka.producer.bootstrap.servers={producer}\n"
    job = parse(write(text))
    assert (job.consumer_bootstrap_servers, job.producer_bootstrap_servers) == expected


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        ("serializers.registry.s.class=org.apache.samza.serializers.StringSerdeFactory", "s", "string"),
        ("serializers.registry.s.class=org.apache.samza.serializers.JsonSerdeFactory", "s", "json"),
        ("serializers.registry.s.class=org.apache.samza.serializers.JsonSerdeV2Factory", "s", "json"),
        ("serializers.registry.s.class=org.apache.samza.serializers.IntegerSerdeFactory", "s", "integer"),
        ("serializers.registry.s.class=org.apache.samza.serializers.LongSerdeFactory", "s", "long"),
        ("serializers.registry.s.class=org.apache.samza.serializers.ByteSerdeFactory", "s", "bytes"),
        ("serializers.registry.s.class=org.apache.samza.serializers.ByteBufferSerdeFactory", "s", "bytes"),
        ("serializers.registry.s.class=samzapy.serdes.JsonSerde", "s", "json"),
        ("serializers.registry.s.class=long", "s", "long"),
    ],
)
def test_serde_class_aliases(write, line: str, key: str, value: str) -> None:
    assert parse(write(BASE + line + "\n")).serializers[key].kind == value


@pytest.mark.parametrize(
    ("factory", "engine"),
    [
        ("org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory", "rocksdb"),
        ("org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory", "inmemory"),
        ("org.apache.samza.storage.kv.InMemoryKeyValueStorageEngineFactory", "inmemory"),
        ("rocksdb", "rocksdb"),
        ("inmemory", "inmemory"),
    ],
)
def test_store_factory_aliases(write, factory: str, engine: str) -> None:
    assert parse(write(BASE + f"stores.s.factory={factory}\n")).stores["s"].engine == engine


def test_builtin_serdes_work_without_registration(write) -> None:
    text = BASE + "stores.s.factory=rocksdb\nstores.s.key.serde=long\nstores.s.msg.serde=json\n"
    assert parse(write(text)).stores["s"].msg_serde == "json"


def test_overrides_apply_and_are_located_as_config_flag(write) -> None:
    file = write(BASE)
    assert parse(file, ("task.commit.ms=10",)).commit_ms == 10
    with pytest.raises(ConfigError, match=r"Invalid value 'x' for 'task.commit.ms' \(--config\)"):
        parse(file, ("task.commit.ms=x",))


def test_from_dict_config_parses() -> None:
    config = Config.from_dict({"job.name": "j", "task.class": "m:C", "task.inputs": "kafka.a"})
    assert parse_job_config(config).job_name == "j"


def test_application_keys_are_free_form(write) -> None:
    assert parse(write(BASE + "app.anything.goes=1\nwindow.size=2\n")).job_name == "counter"


def test_samza_keys_samzapy_ignores_only_warn(write, caplog: pytest.LogCaptureFixture) -> None:
    parse(write(BASE + "job.factory.class=org.apache.samza.job.yarn.YarnJobFactory\n"))
    assert "job.factory.class" in caplog.text and "ignored" in caplog.text


# --- problems ----------------------------------------------------------------------------


def test_invalid_value_names_key_value_file_line_and_what_is_accepted(write) -> None:
    file = write(BASE + "stores.counts.factory=rocksdb\n\nstores.counts.object.cache.size=-5\n")
    assert problems(file) == [
        f"Invalid value '-5' for 'stores.counts.object.cache.size' ({file}:6): must be an integer >= 0"
    ]


def test_error_text_has_heading_and_one_line_per_problem(write) -> None:
    file = write(BASE + "task.commit.ms=0\ntask.window.ms=soon\n")
    with pytest.raises(ConfigError) as info:
        parse(file)
    lines = str(info.value).splitlines()
    assert lines[0] == f"2 problems in {file}:"
    assert lines[1:] == [f"  - {p}" for p in info.value.problems]


@pytest.mark.parametrize("key", ["job.name", "task.class", "task.inputs"])
def test_missing_required_key(write, key: str) -> None:
    text = "\n".join(line for line in BASE.splitlines() if not line.startswith(key + "="))
    file = write(text)
    [problem] = problems(file)
    assert problem.startswith(f"'{key}' is required ({file})")


def test_empty_inputs_is_invalid(write) -> None:
    file = write(BASE.replace("kafka.pageviews", " , "))
    [problem] = problems(file)
    assert problem.startswith(f"Invalid value ', ' for 'task.inputs' ({file}:3): must be a non-empty")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("task.window.ms=0", "an integer >= 1, or -1 to disable"),
        ("task.commit.ms=1.5", "an integer >= 1"),
        ("task.max.concurrency=0", "an integer >= 1"),
        ("task.drop.deserialization.errors=yes", "true or false"),
        ("task.dead.letter.stream=dlq", "a stream name system.stream"),
        ("task.ignored.exceptions=not valid!", "exception class names, or *"),
        ("task.class=not a class", "module:Class"),
        ("task.inputs=pageviews", "system.stream names"),
        ("job.container.count=-1", "an integer >= 1"),
        ("job.name=", "a non-empty string"),
        ("systems.kafka.samza.factory=org.apache.samza.system.hdfs.HdfsSystemFactory", "kafka or"),
        ("systems.kafka.consumer.bootstrap.servers=a b", "'embedded' or a comma-separated list of host:port"),
        ("systems.kafka.default.stream.replication.factor=0", "an integer >= 1"),
        ("systems.kafka.streams.pageviews.samza.offset.default=earliest", "oldest or upcoming"),
        ("systems.kafka.streams.pageviews.samza.bootstrap=1", "true or false"),
        ("systems.kafka.streams.pageviews.partitions=0", "an integer >= 1"),
        ("serializers.registry.x.class=com.example.MySerdeFactory", "a serde kind"),
        ("stores.s.factory=leveldb", "rocksdb, inmemory"),
        ("stores.s.rocksdb.compression=gzip", "one of none, snappy, lz4, zstd"),
        ("stores.s.restore.engine=parallel", "sequential or spark"),
        ("stores.s.write.batch.size=0", "an integer >= 1"),
    ],
)
def test_each_bad_value_is_reported_with_its_key_and_line(write, line: str, expected: str) -> None:
    file = write(BASE + line + "\n")
    key, value = line.split("=", 1)
    found = problems(file)
    assert any(
        p.startswith(f"Invalid value '{value}' for '{key}' ({file}:4): must be ") and expected in p
        for p in found
    ), found


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("stores.my-store.objet.cache.size", "stores.my-store.object.cache.size"),
        ("task.comit.ms", "task.commit.ms"),
        ("job.nmae", "job.name"),
        (
            "systems.kafka.streams.page.views.samza.bootsrap",
            "systems.kafka.streams.page.views.samza.bootstrap",
        ),
        ("serializers.registry.avro.shema", "serializers.registry.avro.schema"),
    ],
)
def test_misspelt_key_gets_a_suggestion(write, key: str, suggestion: str) -> None:
    file = write(BASE + "stores.my-store.factory=rocksdb\n" + key + "=1\n")
    assert f"Unknown key '{key}' ({file}:5): did you mean '{suggestion}'?" in problems(file)


def test_unknown_key_without_close_match_explains_reserved_prefixes(write) -> None:
    file = write(BASE + "task.something.entirely.different=1\n")
    [problem] = problems(file)
    assert problem.startswith(
        f"Unknown key 'task.something.entirely.different' ({file}:4): not a samzapy setting"
    )


def test_passthrough_namespaces_accept_anything(write) -> None:
    text = BASE + "systems.kafka.consumer.fetch.max.bytes=1\nsystems.kafka.producer.acks=all\nmetrics.x.y=z\n"
    job = parse(write(text))
    assert job.consumer_overrides == {"fetch_max_bytes": "1"} and job.producer_overrides == {"acks": "all"}


def test_unregistered_serde_reference(write) -> None:
    file = write(
        BASE + "stores.s.factory=rocksdb\nstores.s.key.serde=strng\nsystems.kafka.samza.msg.serde=avro1\n"
    )
    found = problems(file)
    assert len(found) == 2
    assert found[0].startswith(
        f"Unknown serde 'strng' for 'stores.s.key.serde' ({file}:5): did you mean 'string'?"
    )
    assert "serializers.registry.avro1.class" in found[1]


def test_registered_serde_can_be_referenced(write) -> None:
    text = (
        BASE + "serializers.registry.mine.class=json\nsystems.kafka.streams.pageviews.samza.msg.serde=mine\n"
    )
    assert parse(write(text)).stream(SystemStream("kafka", "pageviews")).msg_serde == "mine"


def test_store_without_factory(write) -> None:
    file = write(BASE + "stores.s.key.serde=string\nstores.s.changelog=kafka.s\n")
    [problem] = problems(file)
    assert problem.startswith(f"'stores.s.factory' is required: store 's' is configured at {file}:4")


def test_serde_without_class(write) -> None:
    file = write(BASE + "serializers.registry.v.schema=v.avsc\n")
    [problem] = problems(file)
    assert problem.startswith(
        f"'serializers.registry.v.class' is required: serde 'v' is configured at {file}:4"
    )


def test_avro_serde_without_schema(write) -> None:
    file = write(BASE + "serializers.registry.v.class=avro\n")
    [problem] = problems(file)
    assert problem.startswith(
        f"'serializers.registry.v.schema' is required for the avro serde set at {file}:4"
    )


def test_avro_schema_file_missing_or_unparseable(write, tmp_path: Path) -> None:
    (tmp_path / "bad.avsc").write_text('{"type": "nosuchtype"}')
    (tmp_path / "notjson.avsc").write_text("{type: record")
    file = write(
        BASE + "serializers.registry.a.class=avro\nserializers.registry.a.schema=missing.avsc\n"
        "serializers.registry.b.class=avro\nserializers.registry.b.schema=bad.avsc\n"
        "serializers.registry.c.class=avro\nserializers.registry.c.schema=notjson.avsc\n"
    )
    found = problems(file)
    assert found[0].startswith(f"Invalid value 'missing.avsc' for 'serializers.registry.a.schema' ({file}:5)")
    assert str(tmp_path / "missing.avsc") in found[0] and "does not exist" in found[0]
    assert found[1].startswith(f"Invalid value 'bad.avsc' for 'serializers.registry.b.schema' ({file}:7)")
    assert "a valid Avro schema" in found[1] and "nosuchtype" in found[1]
    assert found[2].startswith(f"Invalid value 'notjson.avsc' for 'serializers.registry.c.schema' ({file}:9)")
    assert "Expecting property name" in found[2]


def test_schema_path_is_relative_to_the_config_file_not_the_working_directory(
    tmp_path: Path, monkeypatch
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "v.avsc").write_text('"string"')
    (conf / "job.properties").write_text(
        BASE + "serializers.registry.v.class=avro\nserializers.registry.v.schema=v.avsc\n"
    )
    monkeypatch.chdir(REPO)
    assert parse(conf / "job.properties").serializers["v"].schema_path == conf / "v.avsc"


def test_stream_on_unconfigured_system(write) -> None:
    file = write(
        BASE.replace("kafka.pageviews", "kafak.pageviews")
        + "stores.s.factory=rocksdb\nstores.s.changelog=kafak.s\n"
    )
    found = problems(file)
    assert found[0].startswith(f"Stream 'kafak.pageviews' in 'task.inputs' ({file}:3) is on system 'kafak'")
    assert found[1].startswith(f"Stream 'kafak.s' in 'stores.s.changelog' ({file}:5)")
    assert "must be on 'kafka'" in found[0]


def test_stream_config_for_unconfigured_system(write) -> None:
    file = write(
        BASE + "systems.kafka.consumer.bootstrap.servers=embedded\nsystems.kfka.streams.x.partitions=2\n"
    )
    found = problems(file)
    assert found[0].startswith(f"Stream 'kfka.x' in 'systems.kfka.streams.x.partitions' ({file}:5)")


def test_default_system_must_be_configured(write) -> None:
    file = write(BASE + "job.default.system=other\n")
    [problem] = problems(file)
    assert (
        problem
        == f"Invalid value 'other' for 'job.default.system' ({file}:4): must be a configured system (kafka)"
    )


def test_a_changelog_shared_by_two_stores(write) -> None:
    file = write(
        BASE + "stores.a.factory=rocksdb\nstores.a.changelog=kafka.log\n"
        "stores.b.factory=rocksdb\nstores.b.changelog=kafka.log\n"
    )
    assert any("each store needs its own" in p for p in problems(file))


def test_all_problems_are_reported_together_in_file_order(write) -> None:
    file = write(
        "task.class=samzapy.task:StreamTask\n"
        "task.inputs=kafka.a\n"
        "task.comit.ms=5\n"
        "stores.s.factory=leveldb\n"
        "stores.t.key.serde=nope\n"
        "systems.kafka.samza.msg.serde=json\n"
    )
    with pytest.raises(ConfigError) as info:
        parse(file)
    found = info.value.problems
    assert str(info.value).startswith(f"5 problems in {file}:")
    assert found[0].startswith("'job.name' is required")
    assert [re.search(r":(\d+)\)", p).group(1) for p in found[1:3]] == ["3", "4"]
    assert any("'stores.t.factory' is required" in p for p in found)
    assert any("Unknown serde 'nope'" in p for p in found)


def test_check_task_class_reports_import_problems_with_the_rest(write) -> None:
    file = write(BASE.replace("samzapy.task:StreamTask", "samzapy.task:Nope") + "task.commit.ms=x\n")
    with pytest.raises(ConfigError) as info:
        parse_job_config(load_config(file), check_task_class=True)
    assert len(info.value.problems) == 2
    assert "has no attribute 'Nope'" in info.value.problems[0]


# --- the catalogue -----------------------------------------------------------------------


def test_each_catalogue_field_belongs_to_its_model_and_is_set_by_one_key() -> None:
    """A key's spec, field and default are written once: the catalogue names the field, the
    model holds the default, and no two keys (aliases aside) set the same field."""
    setters: dict[tuple[str, str], list[str]] = {}
    for spec in KEYS:
        if spec.field is None:
            continue
        assert spec.field in {f.name for f in dataclasses.fields(spec.model)}, spec.pattern
        if spec.alias_of is None:
            setters.setdefault((spec.model.__name__, spec.scope + "." + spec.field), []).append(spec.pattern)
        else:
            assert find_spec(spec.alias_of.replace("<reporter>", "r"))[0].field == spec.field
    assert {k: v for k, v in setters.items() if len(v) > 1} == {}


def test_every_model_field_is_set_by_a_key_or_by_the_parser() -> None:
    by_model: dict[str, set[str]] = {}
    for spec in KEYS:
        if spec.field is not None:
            by_model.setdefault(spec.model.__name__, set()).add(spec.field)
    parser_set = {
        "JobConfig": {
            "default_system",  # job.default.system, or the one system the keys name
            "streams",
            "serializers",
            "stores",
            "consumer_overrides",
            "producer_overrides",
            "reporters",
            "app_config",
            "imported_task_class",
        },
        "StoreConfig": {"name", "imported_processor"},
        "StreamConfig": {"system_stream"},
        "ReporterSpec": {"name"},
    }
    for model in (JobConfig, StoreConfig, StreamConfig, ReporterSpec):
        fields = {f.name for f in dataclasses.fields(model)}
        assert fields == by_model[model.__name__] | parser_set[model.__name__], model.__name__


def test_a_key_left_out_gets_the_model_default(write) -> None:
    job = parse(write(BASE + "stores.s.factory=rocksdb\nsystems.kafka.streams.x.samza.priority=1\n"))
    assert job == JobConfig(
        job_name="counter",
        task_class="samzapy.task:StreamTask",
        inputs=(SystemStream("kafka", "pageviews"),),
        serializers=job.serializers,
        stores={"s": StoreConfig("s")},
        streams={SystemStream("kafka", "x"): StreamConfig(SystemStream("kafka", "x"), priority=1)},
    )


def _documented_defaults() -> dict[str, str | None]:
    """The default column of every key table in docs/configuration.md."""
    doc = (REPO / "docs" / "configuration.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \| .*? \| (.*?) \| [^|]*\|$", doc, flags=re.MULTILINE)
    cells = {}
    for pattern, cell in rows:
        cells[pattern] = {"—": None, "**required**": "required"}.get(cell, cell.strip("`"))
    return cells


def test_the_documented_defaults_are_the_catalogues() -> None:
    documented = _documented_defaults()
    for spec in KEYS:
        expected = "required" if spec.required else spec.default
        assert documented[spec.pattern] == expected, spec.pattern


def test_every_catalogue_key_is_documented() -> None:
    doc = (REPO / "docs" / "configuration.md").read_text()
    missing = [spec.pattern for spec in KEYS if f"`{spec.pattern}`" not in doc]
    assert not missing


def test_exact_patterns_win_over_passthrough_namespaces() -> None:
    spec, parts = find_spec("systems.kafka.producer.bootstrap.servers")
    assert not spec.passthrough and parts == {"system": "kafka"}

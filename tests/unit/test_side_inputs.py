"""Side-input stores without a broker: configuration, the offset-carrying engines, the
read-only layer, processors and the record writer (docs/side-inputs.md)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from samzapy.config import ConfigError, StoreConfig, load_config, parse_job_config
from samzapy.config.user_code import resolve_processor
from samzapy.container.side_input_processor import RecordWriter
from samzapy.container.side_inputs import SideInputs
from samzapy.errors import StoreError, TaskError
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.serdes import JsonSerde, SerdeResolver, StringSerde
from samzapy.stores.engine import StorageEngine
from samzapy.stores.serialized import SerializedStore
from samzapy.stores.side_input_store import (
    ReadOnlyStore,
    SideInputMemoryStore,
    SideInputRocksDBStore,
    build_side_input_store,
)
from samzapy.streams import SystemStream

BASE = "job.name=enrich\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.pageviews\n"
STORE = "stores.zips.factory=rocksdb\n"


def problems_of(tmp_path: Path, text: str) -> list[str]:
    file = tmp_path / "job.properties"
    file.write_text(text)
    with pytest.raises(ConfigError) as info:
        parse_job_config(load_config(file))
    return info.value.problems


def parse(tmp_path: Path, text: str):
    file = tmp_path / "job.properties"
    file.write_text(text)
    return parse_job_config(load_config(file))


# -- configuration --------------------------------------------------------------------------


def test_side_input_keys_parse_with_partition_scope_by_default(tmp_path: Path) -> None:
    job = parse(tmp_path, BASE + STORE + "stores.zips.side.inputs=kafka.profiles, kafka.moves\n")
    store = job.stores["zips"]
    assert store.side_inputs == (SystemStream("kafka", "profiles"), SystemStream("kafka", "moves"))
    assert (store.side_inputs_scope, store.side_inputs_processor, store.has_side_inputs) == (
        "partition",
        None,
        True,
    )
    assert not StoreConfig("plain").has_side_inputs


def test_side_inputs_with_a_changelog_names_both_keys_and_lines(tmp_path: Path) -> None:
    found = problems_of(
        tmp_path,
        BASE + STORE + "stores.zips.side.inputs=kafka.profiles\nstores.zips.changelog=kafka.zips-log\n",
    )
    assert found == [
        "Store 'zips' has both 'stores.zips.side.inputs' (" + str(tmp_path / "job.properties") + ":5) and "
        "'stores.zips.changelog' ("
        + str(tmp_path / "job.properties")
        + ":6): a side-input store is restored "
        "from its side-input topics, which are its changelog; remove one of the two keys"
    ]


def test_a_side_input_that_is_also_a_task_input_is_refused(tmp_path: Path) -> None:
    found = problems_of(tmp_path, BASE + STORE + "stores.zips.side.inputs=kafka.pageviews\n")
    assert len(found) == 1
    assert "Stream 'kafka.pageviews' is a side input of store 'zips'" in found[0]
    assert "job.properties:5) and also in 'task.inputs'" in found[0]
    assert "job.properties:3)" in found[0]


def test_processor_and_scope_need_side_inputs_and_scope_is_checked(tmp_path: Path) -> None:
    found = problems_of(
        tmp_path,
        BASE
        + STORE
        + "stores.zips.side.inputs.processor.factory=mod:Fn\nstores.zips.side.inputs.scope=global\n"
        + "stores.other.factory=rocksdb\nstores.other.side.inputs=kafka.t\n"
        + "stores.other.side.inputs.scope=all\n",
    )
    assert len(found) == 3
    assert found[0].startswith("'stores.zips.side.inputs.processor.factory' (")
    assert "is set but 'stores.zips.side.inputs' is not" in found[0]
    assert found[1].startswith("'stores.zips.side.inputs.scope' (")
    assert found[2].startswith("Invalid value 'all' for 'stores.other.side.inputs.scope'")
    assert found[2].endswith("must be partition or global")


def test_side_inputs_on_another_system_are_refused(tmp_path: Path) -> None:
    found = problems_of(tmp_path, BASE + STORE + "stores.zips.side.inputs=other.profiles\n")
    assert any("Stream 'other.profiles' in 'stores.zips.side.inputs'" in p for p in found)


# -- engines --------------------------------------------------------------------------------


def test_rocksdb_engine_keeps_offsets_with_the_data_across_reopen(tmp_path: Path) -> None:
    engine = SideInputRocksDBStore(tmp_path / "db")
    assert engine.offsets() == {}
    engine.apply([(b"u1", b"1"), (b"u2", b"2")], {("profiles", 0): 2})
    engine.apply([(b"u1", None), (b"u3", b"3")], {("profiles", 0): 4, ("profiles", 1): 1})
    engine.close()
    reopened = SideInputRocksDBStore(tmp_path / "db")
    assert reopened.offsets() == {("profiles", 0): 4, ("profiles", 1): 1}
    with reopened.all() as entries:
        assert list(entries) == [(b"u2", b"2"), (b"u3", b"3")]  # offsets are not data
    reopened.wipe()
    assert reopened.offsets() == {}
    with reopened.all() as entries:
        assert list(entries) == []
    reopened.close()


def test_memory_engine_keeps_offsets_beside_the_data() -> None:
    engine = SideInputMemoryStore()
    engine.apply([(b"k", b"v")], {("t", 0): 1})
    assert (engine.get(b"k"), engine.offsets()) == (b"v", {("t", 0): 1})
    engine.wipe()
    assert (engine.get(b"k"), engine.offsets()) == (None, {})


def test_store_stack_is_read_only_for_tasks(tmp_path: Path) -> None:
    config = StoreConfig("zips", side_inputs=(SystemStream("kafka", "profiles"),))
    store = build_side_input_store(
        config,
        path=tmp_path / "db",
        key_serde=StringSerde(),
        msg_serde=StringSerde(),
        metrics=MetricsGroup("m"),
    )
    chain = [type(store), type(store.inner), type(store.inner.inner), type(store.raw)]
    assert chain == [StorageEngine, ReadOnlyStore, SerializedStore, SideInputRocksDBStore]
    store.raw.apply([(b"u1", b"94301")], {("profiles", 0): 1})
    assert store.get("u1") == "94301"
    with pytest.raises(StoreError, match=r"store 'zips' is filled from its side inputs .*kafka.profiles"):
        store.put("u1", "10001")
    with pytest.raises(StoreError, match="read-only"):
        store.delete("u1")
    assert store.get("u1") == "94301"
    store.close()
    store.close()  # a global store is closed by every task sharing it


# -- processors and the writer ----------------------------------------------------------------


def record(offset: int, key: bytes | None, value: bytes | None) -> SimpleNamespace:
    return SimpleNamespace(
        offset=offset,
        key=key,
        value=value,
        timestamp=0,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value or b""),
        headers=[],
    )


class CountingProcessor:
    """Counts profiles per user: reads the store, so it needs the batch's pending writes."""

    def process(self, envelope, store):
        return [(envelope.key, (store.get(envelope.key) or 0) + 1)]


def test_default_writer_stores_bytes_as_they_are_and_skips_null_keys() -> None:
    writer = RecordWriter("zips", None, {}, (None, None), store=None)
    writes = writer.writes(
        "kafka", "profiles", 0, [record(0, b"u1", b"a"), record(1, None, b"x"), record(2, b"u1", None)]
    )
    assert (writes, writer.skipped) == ({b"u1": None}, 1)


def test_processor_sees_earlier_writes_of_its_batch(tmp_path: Path) -> None:
    config = StoreConfig("counts", side_inputs=(SystemStream("kafka", "profiles"),))
    store = build_side_input_store(
        config,
        path=tmp_path / "db",
        key_serde=StringSerde(),
        msg_serde=JsonSerde(),
        metrics=MetricsGroup("m"),
    )
    store.raw.apply([(b"u1", b"5")], {("profiles", 0): 1})
    serdes = {"profiles": (StringSerde(), JsonSerde())}
    writer = RecordWriter("counts", CountingProcessor().process, serdes, (StringSerde(), JsonSerde()), store)
    batch = [record(1, b"u1", b"{}"), record(2, b"u2", b"{}"), record(3, b"u1", b"{}")]
    assert writer.writes("kafka", "profiles", 0, batch) == {b"u1": b"7", b"u2": b"1"}
    store.close()


def test_processor_failure_names_store_stream_partition_and_offset() -> None:
    def broken(envelope, store):
        return [(envelope.key, envelope.message["zip"])]

    writer = RecordWriter("zips", broken, {"profiles": (StringSerde(), JsonSerde())}, (None, None), None)
    with pytest.raises(TaskError) as info:
        writer.writes("kafka", "profiles", 2, [record(7, b"u1", b"{}")])
    assert str(info.value) == (
        "side-input processor of store 'zips' failed for the record at stream 'kafka.profiles' "
        "partition 2 offset 7: KeyError: 'zip'"
    )


def test_resolve_processor_accepts_functions_and_classes_and_explains_failures() -> None:
    key, where = "stores.zips.side.inputs.processor.factory", "job.properties:9"
    from_class = resolve_processor("samzapy.jobs.pageview_enrich_global:ZipFromProfile", key, where)
    assert from_class(SimpleNamespace(key="u", message={"zip": "1"}), None) == [("u", "1")]
    function = resolve_processor("os.path:basename", key, where)
    assert function("a/b") == "b"
    with pytest.raises(ConfigError, match=r"\(job.properties:9\): module 'no_such_module' not found"):
        resolve_processor("no_such_module:f", key, where)
    with pytest.raises(ConfigError, match="module 'os.path' has no attribute 'nothing'"):
        resolve_processor("os.path:nothing", key, where)
    with pytest.raises(ConfigError, match="'sep' is a str, not a function or a class"):
        resolve_processor("os.path:sep", key, where)
    with pytest.raises(ConfigError, match="class 'Path' has no method process"):
        resolve_processor("pathlib:Path", key, where)


@pytest.mark.parametrize("name", ["samzapy.stores.side_input_store", "samzapy.jobs.pageview_enrich_global"])
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_a_job_without_side_inputs_opens_no_consumer_and_pumps_nothing(tmp_path: Path) -> None:
    job = parse(tmp_path, BASE + STORE + "stores.zips.changelog=kafka.zips-log\n")
    side = SideInputs.build(job, [0, 1], "nowhere:1", SerdeResolver(job), MetricsRegistry())
    side.catch_up()
    assert (side.pump(), side.targets) == (0, [])
    side.close()

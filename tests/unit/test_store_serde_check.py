"""A value that does not fit a store's serde fails in the task's own put() (issue 16 item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samzapy.config.model import StoreConfig
from samzapy.errors import SerdeError
from samzapy.metrics import MetricsGroup
from samzapy.serdes import JsonSerde, LongSerde, StringSerde
from samzapy.stores.factory import build_store
from samzapy.stores.serialized import StoreSerdeError
from samzapy.task import OutgoingMessageEnvelope, StreamTask
from samzapy.testing import CollectingChangelog, TaskHarness


def _store(tmp_path: Path, msg_serde, *, cache: int = 1000, key_serde=None):
    log = CollectingChangelog()
    store = build_store(
        StoreConfig(name="my-store", engine="inmemory", object_cache_size=cache),
        partition=0,
        base_dir=tmp_path,
        key_serde=key_serde or StringSerde(),
        msg_serde=msg_serde,
        changelog=log,
        metrics=MetricsGroup("store.my-store.Partition 0"),
    )
    return store, log


STRING_MISFIT = (
    "store 'my-store' cannot take the value b'{\"a\": 1}' (bytes) of key 'ann': StringSerde expects a str, "
    "got bytes b'{\"a\": 1}'. The store's value serde is set by stores.my-store.msg.serde: put a value it "
    "takes, or set a serde that fits there"
)


@pytest.mark.parametrize("cache", [1000, 0], ids=["cached", "uncached"])
def test_a_value_that_does_not_fit_fails_at_put_naming_store_key_serde_and_config_key(tmp_path, cache):
    store, log = _store(tmp_path, StringSerde(), cache=cache)
    with pytest.raises(StoreSerdeError) as info:
        store.put("ann", b'{"a": 1}')
    assert str(info.value) == STRING_MISFIT
    store.flush()
    assert log.records == []  # nothing was written


def test_a_key_that_does_not_fit_names_the_key_serde(tmp_path):
    store, _ = _store(tmp_path, JsonSerde())
    with pytest.raises(StoreSerdeError) as info:
        store.put(7, {"a": 1})
    assert str(info.value) == (
        "store 'my-store' cannot take the key 7 (int): StringSerde expects a str, got int 7. The store's key "
        "serde is set by stores.my-store.key.serde: put a key it takes, or set a serde that fits there"
    )


def test_put_all_writes_nothing_when_one_entry_misfits(tmp_path):
    store, log = _store(tmp_path, LongSerde())
    with pytest.raises(StoreSerdeError, match=r"LongSerde expects an int, got str '3'"):
        store.put_all([("ann", 1), ("bob", "3")])
    store.flush()
    assert store.get("ann") is None and log.records == []


def _bytes_store(config: StoreConfig, base_dir: Path) -> Any:
    """``config``'s store without serdes or changelog, as a job builds it (partition 0)."""
    return build_store(
        config,
        partition=0,
        base_dir=base_dir,
        key_serde=None,
        msg_serde=None,
        changelog=None,
        metrics=MetricsGroup("store.raw.Partition 0"),
    )


def test_a_store_without_a_serde_takes_only_bytes_at_put(tmp_path):
    store = _bytes_store(StoreConfig(name="raw", engine="inmemory"), tmp_path)
    with pytest.raises(StoreSerdeError) as info:
        store.put(b"k", 5)
    assert str(info.value) == (
        "store 'raw' cannot take the value 5 (int) of key b'k': the store has no serde, so it takes bytes, "
        "not int. The store's value serde is set by stores.raw.msg.serde: put a value it takes, or set a "
        "serde that fits there"
    )


class _CountsAsText(StreamTask):
    def init(self, context):
        self.counts = context.get_store("counts")

    def process(self, envelope, collector, coordinator):
        self.counts.put(envelope.key, 1)  # an int into a store of strings


def test_the_harness_fails_at_the_tasks_put_not_at_commit():
    harness = TaskHarness(
        _CountsAsText,
        {
            "stores.counts.factory": "inmemory",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "string",
        },
    )
    try:
        with pytest.raises(
            StoreSerdeError, match=r"^store 'counts' cannot take the value 1 \(int\) of key 'ann'"
        ):
            harness.send("kafka.input", "ann", "x")
    finally:
        harness.close()


class _SendsCounts(StreamTask):
    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessageEnvelope("kafka.counts", key=envelope.key, message=1))


def test_the_harness_serialises_outputs_with_the_streams_serdes():
    config = {
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.streams.counts.samza.msg.serde": "long",
    }
    harness = TaskHarness(_SendsCounts, config)
    harness.send("kafka.input", "ann", "x")
    assert harness.collector.serialized == [(b"ann", (1).to_bytes(8, "big"))]
    harness.close()


def test_an_output_that_does_not_fit_fails_at_send_naming_the_stream_and_its_config_keys():
    config = {"systems.kafka.samza.key.serde": "string", "systems.kafka.samza.msg.serde": "string"}
    harness = TaskHarness(_SendsCounts, config)
    with pytest.raises(SerdeError) as info:
        harness.send("kafka.input", "ann", "x")
    assert str(info.value) == (
        "cannot send 1 (int) as the message of 'kafka.counts': StringSerde expects a str, got int 1. The "
        "stream's message serde is set by systems.kafka.streams.counts.samza.msg.serde (or "
        "systems.kafka.samza.msg.serde): send a message it takes, or set a serde that fits there"
    )
    harness.close()


@pytest.mark.parametrize("cache", [0, 100])
def test_a_bytes_store_checks_every_entry_of_a_batch_and_takes_any_bytes_like(tmp_path, cache):
    # A bytes store skips the per-entry check call for bytes keys and values; anything else
    # still gets the full check, in put() and in put_all(), with or without the object cache;
    # bytearray and memoryview reach RocksDB as bytes (its raw mode refused them at the flush).
    store = _bytes_store(StoreConfig(name="raw", engine="rocksdb", object_cache_size=cache), tmp_path)
    with pytest.raises(StoreSerdeError, match=r"cannot take the key 'b' \(str\): the store has no serde"):
        store.put_all([(b"a", b"1"), ("b", b"2")])
    with pytest.raises(StoreSerdeError, match=r"cannot take the value 2 \(int\) of key b'b'"):
        store.put_all([(b"a", b"1"), (b"b", 2)])
    store.put(b"c", bytearray(b"3"))
    store.put_all([(b"d", memoryview(b"4")), (b"e", None)])
    store.delete_all([b"c"])
    store.flush()
    with store.range(b"a", b"z") as entries:
        assert [(k, bytes(v)) for k, v in entries] == [(b"d", b"4")]
    store.close()

"""build_store: the layer order per configuration (walking the chain), and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config.model import StoreConfig
from samzapy.errors import ConfigError
from samzapy.metrics import MetricsGroup
from samzapy.stores.cached import CachedStore
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.logged import LoggedStore
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.stores.serialized import SerdeCheckedStore, SerializedStore
from samzapy.streams import SystemStream
from samzapy.testing import InMemoryChangelog


def chain(engine: StorageEngine) -> list[type]:
    layers, layer = [], engine
    while layer is not None:
        layers.append(type(layer))
        layer = getattr(layer, "inner", None)
    return layers


def build(tmp_path: Path, changelog=None, **options) -> StorageEngine:
    config = StoreConfig(
        name="counts", changelog=SystemStream("kafka", "counts-changelog") if changelog else None, **options
    )
    return build_store(
        config,
        partition=3,
        base_dir=tmp_path,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup("store.counts.Partition 3"),
    )


def test_rocksdb_logged_cached(tmp_path: Path) -> None:
    engine = build(tmp_path, InMemoryChangelog())
    assert chain(engine) == [
        StorageEngine,
        SerdeCheckedStore,
        CachedStore,
        SerializedStore,
        LoggedStore,
        RocksDBStore,
    ]
    assert engine.raw.path == tmp_path / "counts" / "Partition_3"
    assert (tmp_path / "counts" / "Partition_3").is_dir()
    engine.close()


def test_rocksdb_logged_without_cache(tmp_path: Path) -> None:
    engine = build(tmp_path, InMemoryChangelog(), object_cache_size=0)
    assert chain(engine) == [StorageEngine, SerializedStore, LoggedStore, RocksDBStore]
    engine.close()


def test_rocksdb_not_logged_cached(tmp_path: Path) -> None:
    engine = build(tmp_path)
    assert chain(engine) == [StorageEngine, SerdeCheckedStore, CachedStore, SerializedStore, RocksDBStore]
    engine.close()


def test_rocksdb_not_logged_without_cache(tmp_path: Path) -> None:
    engine = build(tmp_path, object_cache_size=0)
    assert chain(engine) == [StorageEngine, SerializedStore, RocksDBStore]
    engine.close()


def test_inmemory_logged_cached(tmp_path: Path) -> None:
    engine = build(tmp_path, InMemoryChangelog(), engine="inmemory")
    assert chain(engine) == [
        StorageEngine,
        SerdeCheckedStore,
        CachedStore,
        SerializedStore,
        LoggedStore,
        InMemoryStore,
    ]
    assert not (tmp_path / "counts").exists()


def test_inmemory_not_logged_without_cache(tmp_path: Path) -> None:
    engine = build(tmp_path, engine="inmemory", object_cache_size=0)
    assert chain(engine) == [StorageEngine, SerializedStore, InMemoryStore]


def test_built_store_logs_last_value_at_flush(tmp_path: Path) -> None:
    log = InMemoryChangelog()
    engine = build(tmp_path, log, engine="inmemory")
    for i in range(10):
        engine.put(b"k", b"%d" % i)
    engine.flush()
    assert log.records == [(b"k", b"9")]
    assert engine.metrics.snapshot()["puts"] == 10


def test_invalid_options_are_reported_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        build(tmp_path, engine="leveldb", compression="brotli", object_cache_size=-1, write_batch_size=0)
    text = str(err.value)
    for expected in (
        "stores.counts.factory",
        "stores.counts.rocksdb.compression",
        "stores.counts.object.cache.size",
        "stores.counts.write.batch.size",
    ):
        assert expected in text
    assert not (tmp_path / "counts").exists()

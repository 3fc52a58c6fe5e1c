"""Each store layer over the in-memory engine, with a list-collecting fake changelog."""

from __future__ import annotations

import pytest

from samzapy.metrics import MetricsGroup
from samzapy.stores.cached import CachedStore
from samzapy.stores.engine import StorageEngine
from samzapy.stores.logged import LoggedStore
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.serialized import SerializedStore
from samzapy.testing import InMemoryChangelog


class StrSerde:
    def to_bytes(self, obj: str) -> bytes:
        return obj.encode()

    def from_bytes(self, data: bytes) -> str:
        return data.decode()


class IntSerde:
    def to_bytes(self, obj: int) -> bytes:
        return obj.to_bytes(8, "big", signed=False)

    def from_bytes(self, data: bytes) -> int:
        return int.from_bytes(data, "big")


# -- logged ---------------------------------------------------------------------------------


def test_put_writes_inner_then_logs_change() -> None:
    inner, log = InMemoryStore(), InMemoryChangelog()
    store = LoggedStore(inner, log)
    store.put(b"a", b"1")
    assert inner.get(b"a") == b"1"
    assert log.records == [(b"a", b"1")]


def test_delete_logs_a_tombstone() -> None:
    inner, log = InMemoryStore(), InMemoryChangelog()
    store = LoggedStore(inner, log)
    store.put(b"a", b"1")
    store.delete(b"a")
    store.put(b"b", None)
    assert inner.get(b"a") is None
    assert log.records == [(b"a", b"1"), (b"a", None), (b"b", None)]


def test_logged_put_all_logs_every_change_in_order() -> None:
    inner, log = InMemoryStore(), InMemoryChangelog()
    store = LoggedStore(inner, log)
    store.put_all([(b"b", b"2"), (b"a", b"1"), (b"b", None)])
    assert log.records == [(b"b", b"2"), (b"a", b"1"), (b"b", None)]
    assert list(store.all()) == [(b"a", b"1")]


def test_logged_reads_do_not_log() -> None:
    log = InMemoryChangelog()
    store = LoggedStore(InMemoryStore(), log)
    store.get(b"x")
    list(store.range(b"a", b"z"))
    assert log.records == []


# -- serialized -------------------------------------------------------------------------------


def test_serialized_round_trips_and_counts_bytes() -> None:
    metrics = MetricsGroup("s")
    inner = InMemoryStore()
    store = SerializedStore(inner, StrSerde(), IntSerde(), metrics)
    store.put("k", 7)
    assert inner.get(b"k") == (7).to_bytes(8, "big")
    assert store.get("k") == 7
    assert store.get("missing") is None
    assert metrics.snapshot()["bytes-written"] == 9
    assert metrics.snapshot()["bytes-read"] == 9


def test_serialized_range_uses_serialised_key_order() -> None:
    store = SerializedStore(InMemoryStore(), IntSerde(), StrSerde())
    store.put_all([(300, "c"), (2, "a"), (256, "b")])
    with store.range(2, 300) as it:
        assert list(it) == [(2, "a"), (256, "b")]
    assert [e.key for e in store.all()] == [2, 256, 300]


def test_serialized_none_serde_passes_bytes() -> None:
    store = SerializedStore(InMemoryStore(), None, None)
    store.put(b"k", b"v")
    assert store.get(b"k") == b"v"
    store.put(b"k", None)
    assert store.get(b"k") is None


# -- cached -----------------------------------------------------------------------------------


def cached_stack(
    cache_size: int = 10, batch: int = 5
) -> tuple[CachedStore, InMemoryStore, InMemoryChangelog, MetricsGroup]:
    metrics = MetricsGroup("c")
    inner, log = InMemoryStore(), InMemoryChangelog()
    store = CachedStore(
        SerializedStore(LoggedStore(inner, log), StrSerde(), StrSerde(), metrics), cache_size, batch, metrics
    )
    return store, inner, log, metrics


def test_cache_writes_a_key_updated_n_times_once() -> None:
    store, inner, log, _ = cached_stack()
    for i in range(100):
        store.put("k", str(i))
    assert log.records == []
    store.flush()
    assert log.records == [(b"k", b"99")]
    assert inner.get(b"k") == b"99"


def test_cache_writes_dirty_entries_in_batches_of_write_batch_size() -> None:
    store, _, log, metrics = cached_stack(cache_size=100, batch=5)
    for i in range(4):
        store.put(f"k{i}", "v")
    assert log.records == [] and metrics.snapshot()["dirty-count"] == 4
    store.put("k4", "v")
    assert len(log.records) == 5 and metrics.snapshot()["dirty-count"] == 0


def test_cache_hits_and_misses() -> None:
    store, inner, _, metrics = cached_stack()
    inner.put(b"a", b"1")
    assert store.get("a") == "1"
    assert store.get("a") == "1"
    assert store.get("nope") is None
    assert store.get("nope") is None
    snap = metrics.snapshot()
    assert (snap["cache-hits"], snap["cache-misses"]) == (2, 2)


def test_cache_put_none_caches_the_deletion() -> None:
    store, inner, log, _ = cached_stack()
    inner.put(b"a", b"1")
    store.put("a", None)
    assert store.get("a") is None
    assert inner.get(b"a") == b"1"
    store.flush()
    assert inner.get(b"a") is None
    assert log.records == [(b"a", None)]


def test_cache_range_and_all_see_dirty_entries() -> None:
    store, _, _, _ = cached_stack(cache_size=100, batch=50)
    store.put("b", "2")
    store.put("a", "1")
    store.delete("b")
    with store.range("a", "z") as it:
        assert list(it) == [("a", "1")]
    store.put("c", "3")
    assert list(store.all()) == [("a", "1"), ("c", "3")]


def test_cache_evicting_a_dirty_entry_writes_it_down() -> None:
    store, inner, _, _ = cached_stack(cache_size=3, batch=3)
    store.put("a", "1")
    store.put("b", "2")
    store.get("zz")  # a clean entry
    store.get("zz2")  # evicts "a" (dirty): written down first
    assert inner.get(b"a") == b"1"
    assert store.get("a") == "1"


def test_cache_put_all_writes_through_after_dirty_entries() -> None:
    store, inner, log, _ = cached_stack(cache_size=100, batch=50)
    store.put("a", "old")
    store.put_all([("a", "new"), ("b", "2")])
    assert log.records == [(b"a", b"old"), (b"a", b"new"), (b"b", b"2")]
    assert inner.get(b"a") == b"new"
    assert store.get("b") == "2"


def test_cache_rejects_zero_sizes() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        CachedStore(InMemoryStore(), 0, 1)


# -- metered (StorageEngine) -------------------------------------------------------------------


def test_engine_counts_and_times_operations() -> None:
    metrics = MetricsGroup("m")
    raw = InMemoryStore()
    engine = StorageEngine("s", 0, raw, raw=raw, metrics=metrics)
    engine.put(b"a", b"1")
    engine.put_all([(b"b", b"2"), (b"c", b"3")])
    engine.get(b"a")
    engine.get_all([b"a", b"b"])
    engine.delete(b"a")
    list(engine.range(b"a", b"z"))
    list(engine.all())
    engine.flush()
    snap = metrics.snapshot()
    assert (snap["puts"], snap["gets"], snap["deletes"], snap["ranges"], snap["alls"], snap["flushes"]) == (
        3,
        3,
        1,
        1,
        1,
        1,
    )
    assert snap["put-ns"] > 0 and snap["get-ns"] > 0


def test_engine_without_changelog_restores_nothing() -> None:
    raw = InMemoryStore()
    engine = StorageEngine("s", 0, raw, raw=raw)
    raw.put(b"a", b"1")
    stats = engine.restore(5)
    assert stats.restored_messages == 0
    assert raw.get(b"a") == b"1"
    assert engine.changelog_offset() is None
    engine.checkpoint(3)  # no-op

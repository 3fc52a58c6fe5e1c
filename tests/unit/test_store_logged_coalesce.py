"""LoggedStore with coalescing: one changelog record per changed key per flush."""

from __future__ import annotations

from pathlib import Path

from support import build_one_store, one_store_config

from samzapy.stores.logged import LoggedStore
from samzapy.stores.memory import InMemoryStore
from samzapy.testing import InMemoryChangelog


def test_coalescing_writes_inner_at_once_and_logs_the_last_value_at_flush() -> None:
    inner, log = InMemoryStore(), InMemoryChangelog()
    store = LoggedStore(inner, log, coalesce=True)
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    store.put_all([(b"b", b"1"), (b"a", b"3")])
    assert inner.get(b"a") == b"3"
    assert list(store.range(b"a", b"z")) == [(b"a", b"3"), (b"b", b"1")]
    assert log.records == []
    store.flush()
    assert log.records == [(b"a", b"3"), (b"b", b"1")]
    store.flush()
    assert log.records == [(b"a", b"3"), (b"b", b"1")]


def test_coalescing_keeps_a_delete_as_a_tombstone() -> None:
    inner, log = InMemoryStore(), InMemoryChangelog()
    store = LoggedStore(inner, log, coalesce=True)
    store.put(b"w", b"1")
    store.delete(b"w")
    store.put_all([(b"x", b"1"), (b"x", None)])
    store.flush()
    assert log.records == [(b"w", None), (b"x", None)]
    assert inner.get(b"w") is None and inner.get(b"x") is None


def test_coalescing_sends_early_when_too_many_keys_are_pending() -> None:
    log = InMemoryChangelog()
    store = LoggedStore(InMemoryStore(), log, coalesce=True, max_pending=3)
    store.put(b"a", b"1")
    store.put(b"b", b"1")
    assert log.records == []
    store.put(b"c", b"1")
    assert log.records == [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]
    store.put(b"a", b"2")
    store.flush()
    assert log.records[-1] == (b"a", b"2")


def test_without_coalescing_every_change_is_sent_at_once() -> None:
    log = InMemoryChangelog()
    store = LoggedStore(InMemoryStore(), log)
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    assert log.records == [(b"a", b"1"), (b"a", b"2")]


def test_the_store_setting_turns_coalescing_on(tmp_path: Path) -> None:
    store_config = one_store_config("inmemory", changelog_coalesce="true")
    assert store_config.changelog_coalesce is True
    log = InMemoryChangelog()
    store = build_one_store(store_config, tmp_path, log)
    store.put(b"k", b"1")
    store.put(b"k", b"2")
    store.flush()
    assert log.records == [(b"k", b"2")]

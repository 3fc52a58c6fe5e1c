"""LoggedStore coalescing of keys new since the last send: no record for a key created and deleted.

A key read as absent, then written and deleted before the pending changes are sent, needs no
changelog record at all; a key whose earlier value reached the changelog keeps its tombstone.
Proved against the slow path (no coalescing) by what a restore from each changelog gives.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from support import build_one_store, one_store_config

from samzapy.stores.engine import StorageEngine
from samzapy.stores.logged import MAX_ABSENT, LoggedStore
from samzapy.stores.memory import InMemoryStore
from samzapy.testing import InMemoryChangelog


def _coalescing() -> tuple[InMemoryStore, InMemoryChangelog, LoggedStore]:
    inner, log = InMemoryStore(), InMemoryChangelog()
    return inner, log, LoggedStore(inner, log, coalesce=True)


def test_a_key_read_as_absent_then_created_and_deleted_sends_nothing() -> None:
    _, log, store = _coalescing()
    assert store.get(b"w1") is None
    store.put(b"w1", b"1")
    store.put(b"w1", b"2")
    store.delete(b"w1")
    assert store.get(b"w2") is None
    store.put_all([(b"w2", b"1")])
    store.put_all([(b"w2", None)])
    store.flush()
    assert log.records == []


def test_a_key_whose_value_reached_the_changelog_keeps_its_tombstone() -> None:
    inner, log, store = _coalescing()
    assert store.get(b"w") is None
    store.put(b"w", b"1")
    store.flush()  # the value is in the changelog now
    store.put(b"w", b"2")
    store.delete(b"w")
    store.flush()
    assert log.records == [(b"w", b"1"), (b"w", None)]
    assert inner.get(b"w") is None


def test_a_key_sent_early_by_the_pending_cap_keeps_its_tombstone() -> None:
    log = InMemoryChangelog()
    store = LoggedStore(InMemoryStore(), log, coalesce=True, max_pending=2)
    for key in (b"a", b"b"):
        assert store.get(key) is None
        store.put(key, b"1")  # the second put reaches the cap: both are sent
    store.delete_all([b"a", b"b"])
    store.flush()
    assert log.records == [(b"a", b"1"), (b"b", b"1"), (b"a", None), (b"b", None)]


def test_a_key_not_read_first_keeps_its_tombstone() -> None:
    _, log, store = _coalescing()
    store.put(b"w", b"1")  # never read: the layer cannot know the changelog has no value
    store.delete(b"w")
    store.flush()
    assert log.records == [(b"w", None)]


def test_a_stored_key_is_not_taken_as_absent() -> None:
    inner, log, store = _coalescing()
    inner.put(b"w", b"0")  # as a restore leaves it: in the store and the changelog
    log.send(b"w", b"0")
    assert store.get(b"w") == b"0"
    store.put(b"w", b"1")
    store.delete(b"w")
    store.flush()
    assert log.latest() == {}


def test_invalidate_forgets_absent_keys() -> None:
    inner, log, store = _coalescing()
    assert store.get(b"w") is None
    store.invalidate()
    inner.put(b"w", b"0")  # a restore rewrote the store underneath
    log.send(b"w", b"0")
    store.put(b"w", b"1")
    store.delete(b"w")
    store.flush()
    assert log.latest() == {}


def test_absent_keys_are_bounded() -> None:
    _, log, store = _coalescing()
    for i in range(MAX_ABSENT + 10):
        store.get(b"k%d" % i)
    assert len(store._absent) <= MAX_ABSENT
    store.put(b"k0", b"1")  # forgotten when the set was cleared: logged as before
    store.delete(b"k0")
    store.flush()
    assert log.records == [(b"k0", None)]


def _random_ops(rng: random.Random, stores: list[LoggedStore], rounds: int) -> None:
    """The same random gets, puts, deletes, batches and flushes on every store."""
    keys = [b"k%d" % i for i in range(40)]
    for _ in range(rounds):
        op = rng.random()
        key = rng.choice(keys)
        value = b"%d" % rng.randrange(1000)
        batch = [(rng.choice(keys), rng.choice([None, value])) for _ in range(rng.randrange(1, 6))]
        for store in stores:
            if op < 0.35:
                store.get(key)
            elif op < 0.6:
                store.put(key, value)
            elif op < 0.75:
                store.delete(key)
            elif op < 0.95:
                store.put_all(batch)
            else:
                store.flush()


def test_random_changes_restore_to_the_same_state_as_without_coalescing() -> None:
    rng = random.Random(7)
    for round_ in range(30):
        slow_inner, slow_log = InMemoryStore(), InMemoryChangelog()
        fast_inner, fast_log = InMemoryStore(), InMemoryChangelog()
        slow = LoggedStore(slow_inner, slow_log)
        fast = LoggedStore(fast_inner, fast_log, coalesce=True, max_pending=rng.choice([3, 8, 1000]))
        _random_ops(rng, [slow, fast], 300)
        slow.flush()
        fast.flush()
        state = dict(list(slow_inner.all()))
        assert dict(list(fast_inner.all())) == state, round_
        assert slow_log.latest() == state, round_
        assert fast_log.latest() == state, round_
        assert len(fast_log.records) <= len(slow_log.records)


def _window_store(tmp_path: Path, name: str, log: InMemoryChangelog) -> StorageEngine[Any, Any]:
    return build_one_store(
        one_store_config(object_cache_size="4", write_batch_size="2"), tmp_path / name, log
    )


def test_a_restore_brings_back_exactly_the_store_with_short_lived_keys(tmp_path: Path) -> None:
    """RocksDB, object cache and coalescing, as a job builds them; a restore on a fresh dir."""
    log = InMemoryChangelog()
    store = _window_store(tmp_path, "a", log)
    # Windows as the operator writes them: a get that misses, a put, a close that deletes.
    for i in range(20):
        key = b"w%02d" % i
        assert store.get(key) is None
        store.put(key, b"1")
        if i % 3 == 0:
            store.put(key, b"2")
    store.flush()  # commit: w00..w19 reach the changelog
    sent = len(log.records)
    store.delete_all([b"w%02d" % i for i in range(0, 20, 2)])  # closed after reaching it
    for i in range(20, 40):  # created and closed within one commit
        key = b"w%02d" % i
        assert store.get(key) is None
        store.put(key, b"1")
    store.delete_all([b"w%02d" % i for i in range(20, 40)])
    store.put(b"w41", b"5")
    store.flush()
    assert sorted(k for k, _ in log.records[sent:]) == [b"w%02d" % i for i in range(0, 20, 2)] + [b"w41"]
    expected = list(store.all())
    assert [k for k, _ in expected] == [b"w%02d" % i for i in range(1, 20, 2)] + [b"w41"]
    restored = _window_store(tmp_path, "b", log)
    restored.restore(log.offset(), trusted_local=False)
    assert list(restored.all()) == expected
    store.close()
    restored.close()

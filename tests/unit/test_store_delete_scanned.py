"""``delete_scanned``: a scanned range deleted as one gives exactly ``delete_all`` of its keys.

The window operator purges closed windows with it (one RocksDB range tombstone instead of one
per window). Two stacks as a job builds them (object cache, coalescing changelog) get the same
random gets, puts, batches, flushes and purges of scanned ranges, one purging with
``delete_scanned`` and one with ``delete_all``: the stores, the changelog records and a store
restored from each changelog on a fresh directory must be equal after every round.
"""

from __future__ import annotations

import random
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from support import build_one_store, one_store_config

from samzapy.serdes import StringSerde
from samzapy.stores.engine import StorageEngine
from samzapy.testing import InMemoryChangelog


def _store(
    tmp_path: Path, name: str, log: InMemoryChangelog, engine: str, serde: bool
) -> StorageEngine[Any, Any]:
    config = one_store_config(engine, object_cache_size="8", write_batch_size="3")
    return build_one_store(config, tmp_path / name, log, StringSerde() if serde else None)


def _key(i: int, serde: bool) -> Any:
    key = f"k{i:03d}"
    return key if serde else key.encode()


@pytest.mark.parametrize(("engine", "serde"), [("rocksdb", False), ("rocksdb", True), ("inmemory", False)])
def test_deleting_a_scanned_range_equals_deleting_its_keys(tmp_path: Path, engine: str, serde: bool) -> None:
    rng = random.Random(32)
    ranged_log, keyed_log = InMemoryChangelog(), InMemoryChangelog()
    ranged = _store(tmp_path, "ranged", ranged_log, engine, serde)
    keyed = _store(tmp_path, "keyed", keyed_log, engine, serde)
    for round_ in range(300):
        op = rng.random()
        i = rng.randrange(200)
        if op < 0.4:  # a window's update: a get, then a put
            assert ranged.get(_key(i, serde)) == keyed.get(_key(i, serde)), round_
            value = str(rng.randrange(5)) if serde else b"%d" % rng.randrange(5)
            ranged.put(_key(i, serde), value)
            keyed.put(_key(i, serde), value)
        elif op < 0.5:
            batch = [(_key(rng.randrange(200), serde), "b" if serde else b"b") for _ in range(4)]
            ranged.put_all(batch)
            keyed.put_all(batch)
        elif op < 0.6:
            ranged.flush()  # a commit: pending changes reach the changelog
            keyed.flush()
        else:  # a purge: scan a range (at most ``limit`` entries), delete what it found
            low, high = sorted((i, rng.randrange(200)))
            low_key, high_key = _key(low, serde), _key(high, serde)
            limit = rng.choice([None, 1, 3, 10])
            with ranged.range(low_key, high_key) as entries:
                found = [k for k, _ in islice(entries, limit)]
            with keyed.range(low_key, high_key) as entries:
                assert [k for k, _ in islice(entries, limit)] == found, round_
            # As the window operator does: a full batch ends just after its last key.
            end = (
                found[-1] + ("\x00" if serde else b"\x00")
                if limit is not None and len(found) == limit
                else high_key
            )
            if found:
                ranged.delete_scanned(found, low_key, end)
                keyed.delete_all(found)
        assert list(ranged.all()) == list(keyed.all()), round_
    ranged.flush()
    keyed.flush()
    assert ranged_log.records == keyed_log.records
    expected = list(keyed.all())
    assert list(ranged.all()) == expected
    restored = _store(tmp_path, "restored", ranged_log, engine, serde)
    restored.restore(ranged_log.offset(), trusted_local=False)
    assert list(restored.all()) == expected
    for store in (ranged, keyed, restored):
        store.close()


def test_a_range_delete_leaves_the_keys_around_it(tmp_path: Path) -> None:
    log = InMemoryChangelog()
    store = _store(tmp_path, "s", log, "rocksdb", False)
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"b\x00", b"3"), (b"c", b"4")])
    store.flush()
    with store.range(b"b", b"c") as entries:
        found = [k for k, _ in islice(entries, 1)]
    assert found == [b"b"]
    store.delete_scanned(found, b"b", b"b\x00")  # a batch of one: up to just after b"b"
    store.flush()
    assert list(store.all()) == [(b"a", b"1"), (b"b\x00", b"3"), (b"c", b"4")]
    assert log.records[-1] == (b"b", None)
    store.close()

"""The restore's cost cuts of round 5 keep its results: the fence's batch check, the paused
cyclic collector, and the reset of a store nothing was written to."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import NamedTuple

from samzapy.checkpoint import ChangelogFence, generation_header
from samzapy.records import TopicPartition
from samzapy.stores.restore import _ruled_out, cyclic_gc_paused
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.stores.side_input_store import SideInputRocksDBStore


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _batch() -> list[Rec]:
    """Offsets 0..11 with generations 1, 2, 3 and no header, a record without a key among them."""
    kinds = [generation_header(1), generation_header(2), generation_header(3), []]
    return [Rec(i, None if i == 9 else b"k%d" % i, b"v", kinds[i % 4]) for i in range(12)]


def test_the_batch_check_rules_out_exactly_what_the_fence_skips() -> None:
    batch = _batch()
    for start, generation in ((None, 2), (4, 2), (None, 3), (20, 3)):
        fence = ChangelogFence(start, generation)
        expected = {r.key for r in batch if r.key is not None and fence.skips(r)}
        assert _ruled_out(batch, fence) == expected
    assert _ruled_out(batch, ChangelogFence(None, 2)) == {b"k0", b"k4", b"k8"}
    assert _ruled_out(batch, ChangelogFence(4, 3)) == {b"k5", b"k8"}
    assert _ruled_out([], ChangelogFence(None, 2)) == set()


def test_the_collector_is_paused_inside_and_back_after_even_nested_or_failing() -> None:
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    try:
        with cyclic_gc_paused():
            raise KeyError("boom")
    except KeyError:
        pass
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_reset_of_a_store_never_written_keeps_it_and_of_one_written_empties_it(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "fresh" / "Partition_0")
    assert store._holds_nothing()
    store.reset(None)
    store.put(b"a", b"1")
    assert not store._holds_nothing()
    store.reset(None)
    assert list(store.all()) == []
    store.put(b"b", b"2")
    assert dict(store.all()) == {b"b": b"2"}
    store.close()


def test_a_side_input_store_with_offsets_only_is_wiped(tmp_path: Path) -> None:
    store = SideInputRocksDBStore(tmp_path / "side" / "Partition_0")
    store.apply([], {TopicPartition("profiles", 0): 7})  # offsets, no data
    assert not store._holds_nothing()
    store.wipe()
    assert store.offsets() == {}
    store.close()

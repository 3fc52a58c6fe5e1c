"""A restore from what Kafka's compaction leaves of a changelog equals a restore from the full
log, byte for byte (issue 28 item 2): zombie records (a lower generation, after the takeover),
tombstones, transaction markers and aborted transactional records included. In memory: the
changelog as a list of records with their offsets, the in-memory engine as the store."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from samzapy.checkpoint import ChangelogFence, generation_header
from samzapy.kafka.compaction import compact
from samzapy.metrics import MetricsGroup
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.restore import restore


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    is_control: bool = False
    aborted: bool = False


class Log:
    """A changelog partition with gaps in its offsets (as compaction leaves it); the restore's
    trim writes are appended with the restoring owner's generation."""

    def __init__(self, records: list[Rec], end: int, generation: int) -> None:
        self.records = [r for r in records if not r.is_control and not r.aborted]  # what a reader gets
        self.end = end
        self.generation = generation

    def read(self, start: int, stop: int | None = None) -> Iterator[list[Rec]]:
        chosen = [r for r in self.records if r.offset >= start and (stop is None or r.offset < stop)]
        for at in range(0, len(chosen), 7):
            yield chosen[at : at + 7]

    def end_offset(self) -> int:
        return self.end

    def send(self, key: bytes, value: bytes | None) -> None:
        self.records.append(Rec(self.end, key, value, generation_header(self.generation)))
        self.end += 1

    def set_known_offset(self, offset: int | None) -> None:
        self.known = offset

    def close_reader(self) -> None:
        pass


class Writer:
    """Builds a changelog the way owners, zombies and a transactional producer write it."""

    def __init__(self) -> None:
        self.records: list[Rec] = []

    def put(self, generation: int, key: bytes, value: bytes | None, **flags: bool) -> int:
        self.records.append(Rec(len(self.records), key, value, generation_header(generation), **flags))
        return len(self.records) - 1

    def marker(self) -> None:
        self.records.append(Rec(len(self.records), None, None, [], is_control=True))


def restored(
    records: list[Rec], end: int, k: int, fence: ChangelogFence, generation: int
) -> dict[bytes, bytes]:
    store = InMemoryStore()
    restore(store, Log(records, end, generation), k, MetricsGroup("store"), fence=fence)
    with store.all() as entries:
        return dict(entries)


def zombie_history(seed: int) -> tuple[Writer, int, ChangelogFence]:
    """Owner 1 writes; owner 2 claims at offset S, restores (rewriting the keys of the zombie's
    records that landed before its restore), writes on; owner 1, a zombie, wrote records after S
    that landed before owner 2's restore. Tombstones and a transaction (committed and aborted)."""
    rng = random.Random(seed)
    log = Writer()
    keys = [b"k%d" % i for i in range(40)]
    for _ in range(200):
        log.put(1, rng.choice(keys), b"%d" % rng.randrange(1000))
    start = log.put(1, rng.choice(keys), None)  # owner 2's claim: the last committed record
    zombie = {rng.choice(keys): b"zombie-%d" % i for i in range(15)}
    for key, value in zombie.items():
        log.put(1, key, value)
    restored_before = dict.fromkeys(zombie)  # owner 2's restore rewrote them with its values
    for key in restored_before:
        log.put(2, key, b"rewritten")
    for i in range(300):
        key = rng.choice(keys)
        if i % 50 == 10:  # a transaction: committed, then one aborted
            log.put(2, key, b"in-tx-%d" % i)
            log.marker()
            log.put(2, key, b"aborted-%d" % i, aborted=True)
            log.marker()
        elif i % 13 == 0:
            log.put(2, key, None)
        else:
            log.put(2, key, b"%d" % rng.randrange(1000))
    return log, start, ChangelogFence(start, 2)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("drop_tombstones", [False, True])
def test_a_restore_from_the_compacted_log_equals_one_from_the_full_log(
    seed: int, drop_tombstones: bool
) -> None:
    log, _, fence = zombie_history(seed)
    end = len(log.records)
    full = restored(log.records, end, end - 1, fence, generation=2)
    compacted = compact(log.records, drop_tombstones=drop_tombstones, aborted=lambda r: r.aborted)
    assert len(compacted) < len(log.records) / 3
    assert restored(compacted, end, end - 1, fence, generation=2) == full
    assert full  # not an empty comparison
    assert not any(v.startswith((b"aborted", b"zombie")) for v in full.values())


@pytest.mark.parametrize("seed", range(4))
def test_records_beyond_the_checkpoint_displace_nothing_while_they_are_not_cleanable(seed: int) -> None:
    """A crash left records after the checkpoint (the next restore undoes them). While they
    lie in the active segment or within ``min.compaction.lag.ms`` (``upto``), the cleaner does
    not let them replace the checkpointed values of their keys."""
    log, _, fence = zombie_history(seed)
    end = len(log.records)
    k = end - 1 - 17 * (seed + 1)
    full = restored(log.records, end, k, fence, generation=2)
    compacted = compact(log.records, upto=k + 1, aborted=lambda r: r.aborted)
    assert len(compacted) < len(log.records) / 2
    assert restored(compacted, end, k, fence, generation=2) == full

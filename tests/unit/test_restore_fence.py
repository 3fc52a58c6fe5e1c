"""Restore skips a zombie's changelog records (issue 21 item 6): records of a lower ownership
generation after the offsets the checkpoint's generation claimed the task at; the keys it
skipped are rewritten with their committed values. In memory: a list of records as the
changelog, the in-memory engine as the store."""

from __future__ import annotations

from collections import namedtuple

from samzapy.checkpoint import ChangelogFence, generation_header
from samzapy.metrics import MetricsGroup
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.restore import restore

Record = namedtuple("Record", "offset key value headers serialized_key_size serialized_value_size")


class ListChangelog:
    """A changelog partition held in a list; ``send`` appends with the writer's generation."""

    def __init__(self, writes: list[tuple[int, bytes, bytes | None]], generation: int) -> None:
        self.records: list[Record] = []
        for gen, key, value in writes:
            self._append(gen, key, value)
        self.generation = generation
        self.sent: list[tuple[bytes, bytes | None]] = []

    def _append(self, gen: int | None, key: bytes, value: bytes | None) -> None:
        headers = [] if gen is None else generation_header(gen)
        self.records.append(Record(len(self.records), key, value, headers, len(key), len(value or b"")))

    def read(self, start: int, stop: int | None = None):
        chosen = [r for r in self.records if r.offset >= start and (stop is None or r.offset < stop)]
        if chosen:
            yield chosen

    def end_offset(self) -> int:
        return len(self.records)

    def send(self, key: bytes, value: bytes | None) -> None:
        self.sent.append((key, value))
        self._append(self.generation, key, value)

    def set_known_offset(self, offset: int | None) -> None:
        self.known = offset

    def close_reader(self) -> None:
        pass


def state(store: InMemoryStore) -> dict[bytes, bytes]:
    with store.all() as entries:
        return dict(entries)


def last_values(changelog: ListChangelog) -> dict[bytes, bytes]:
    values: dict[bytes, bytes | None] = {}
    for record in changelog.records:
        values[record.key] = record.value
    return {k: v for k, v in values.items() if v is not None}


def test_a_zombies_records_after_the_takeover_are_skipped_and_their_keys_rewritten() -> None:
    changelog = ListChangelog(
        [
            (1, b"a", b"1"),  # 0: generation 1, committed (claimed by 2 at offset 1)
            (1, b"b", b"1"),  # 1
            (2, b"a", b"2"),  # 2: the replacement
            (1, b"b", b"zombie"),  # 3: the zombie, after the takeover
            (1, b"c", b"zombie"),  # 4: a key only the zombie wrote
            (2, b"d", b"2"),  # 5: the replacement again; its checkpoint: K=5
        ],
        generation=3,  # the restorer
    )
    store = InMemoryStore()

    stats = restore(store, changelog, 5, MetricsGroup("s"), fence=ChangelogFence(start=1, generation=2))

    assert state(store) == {b"a": b"2", b"b": b"1", b"d": b"2"}
    assert changelog.sent == [(b"b", b"1"), (b"c", None)]  # the skipped keys, set back
    assert last_values(changelog) == state(store)  # a naive reader agrees again
    assert stats.restored_messages == 6 and stats.trim_writes == 2


def test_without_a_fence_every_record_counts() -> None:
    changelog = ListChangelog([(1, b"a", b"1"), (None, b"a", b"legacy"), (2, b"b", b"2")], generation=3)
    store = InMemoryStore()
    restore(store, changelog, 2, MetricsGroup("s"))
    assert state(store) == {b"a": b"legacy", b"b": b"2"}
    assert changelog.sent == []


def test_records_without_a_generation_header_are_never_skipped() -> None:
    changelog = ListChangelog([(None, b"a", b"old"), (1, b"b", b"zombie"), (2, b"c", b"2")], generation=2)
    store = InMemoryStore()
    restore(store, changelog, 2, MetricsGroup("s"), fence=ChangelogFence(start=None, generation=2))
    assert state(store) == {b"a": b"old", b"c": b"2"}
    assert changelog.sent == [(b"b", None)]

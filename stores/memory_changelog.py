"""``InMemoryChangelog``: a restorable changelog partition held in a list, for tests.

It behaves as a Kafka changelog partition does for a store (offsets from 0, each send
acknowledged at once, reads in batches up to a stop offset, tombstones as ``None``), so that
the restore (choose a base, replay to ``K``, trim beyond ``K``) runs in unit tests without a
broker. ``samzapy.testing`` exports it; :class:`samzapy.testing.TaskHarness` captures every
logged store's changes in one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

#: Records per batch :meth:`InMemoryChangelog.read` yields (a fetch of a real consumer).
READ_BATCH = 100


def latest_state(records: Iterable[tuple[bytes, bytes | None]]) -> dict[bytes, bytes]:
    """The last value per key of ``records`` (in log order), tombstones (``None``) removed.

    What a restore of a changelog holding ``records`` yields, compaction or not.
    """
    state: dict[bytes, bytes | None] = {}
    for key, value in records:
        state[key] = value
    return {k: v for k, v in state.items() if v is not None}


class StoredRecord(NamedTuple):
    """One record of an :class:`InMemoryChangelog` (the fields restore reads of a Kafka record)."""

    offset: int
    key: bytes
    value: bytes | None


class InMemoryChangelog:
    """A changelog partition in memory: a :class:`~samzapy.stores.changelog.RestorableChangelog`.

    :attr:`entries` holds the records with their offsets; :attr:`records` the (key, value)
    pairs in order; :meth:`latest` the state a restore to the end yields. :meth:`compact`
    keeps the last record of each key (as Kafka's log compaction may, leaving offset gaps).
    Not thread-safe.

    Example:
        >>> log = InMemoryChangelog()
        >>> log.send(b"a", b"1"); log.send(b"a", b"2"); log.send(b"b", None)
        >>> log.end_offset(), log.offset(), log.latest()
        (3, 2, {b'a': b'2'})
    """

    def __init__(self, topic: str = "changelog", partition: int = 0, read_batch: int = READ_BATCH) -> None:
        self.topic = topic
        self.partition = partition
        self.entries: list[StoredRecord] = []
        self.read_batch = read_batch
        self.reads = 0  # read() calls: a restore that needs no replay reads nothing
        self._next = 0
        self._known_offset: int | None = None

    def send(self, key: bytes, value: bytes | None) -> None:
        """Append one change (acknowledged at once)."""
        self.entries.append(StoredRecord(self._next, key, value))
        self._next += 1

    @property
    def records(self) -> list[tuple[bytes, bytes | None]]:
        """Every (key, value) sent, in order (``None``: a tombstone)."""
        return [(r.key, r.value) for r in self.entries]

    def latest(self) -> dict[bytes, bytes]:
        """The last value per key, tombstones removed: what a restore to the end yields."""
        return latest_state(self.records)

    def read(self, start: int, stop: int | None = None) -> Iterator[list[StoredRecord]]:
        """Batches of the records with ``start <= offset < stop`` (``None``: to the end)."""
        self.reads += 1
        wanted = [r for r in self.entries if r.offset >= start and (stop is None or r.offset < stop)]
        for at in range(0, len(wanted), self.read_batch):
            yield wanted[at : at + self.read_batch]

    def end_offset(self) -> int:
        """The offset the next record gets (0 when nothing was ever sent)."""
        return self._next

    def offset(self) -> int | None:
        """The offset of the last change the store reflects.

        The last one sent, or where a restore left it (the greater).
        """
        sent = self._next - 1 if self._next else None
        if sent is None or self._known_offset is None:
            return sent if sent is not None else self._known_offset
        return max(sent, self._known_offset)

    def set_known_offset(self, offset: int | None) -> None:
        """Record the offset a restore brought the store to."""
        self._known_offset = offset

    def close_reader(self) -> None:
        """Nothing to release."""

    def compact(self) -> None:
        """Keep only the last record of each key (offsets unchanged: gaps appear)."""
        last = {r.key: r.offset for r in self.entries}
        self.entries = [r for r in self.entries if last[r.key] == r.offset]

    def copy(self) -> InMemoryChangelog:
        """An independent changelog with the same records (restoring from it leaves this one as it is)."""
        other = InMemoryChangelog(self.topic, self.partition, self.read_batch)
        other.entries = list(self.entries)
        other._next = self._next
        return other

    def __repr__(self) -> str:
        return f"InMemoryChangelog({self.topic!r}, {self.partition}, {len(self.entries)} records)"

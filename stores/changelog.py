"""A store's changelog as the store side sees it.

The protocols the store layers and the restore rely on, and the discarding one. No Kafka here:
the Kafka changelog is :class:`samzapy.kafka.changelog.KafkaChangelog`.

Two protocols, so that code asks for what it uses rather than probing attributes:

* :class:`ChangelogWriter` (``send``): what the logged layer writes to. Any object with it
  will do (the Spark replay discards, tests collect).
* :class:`RestorableChangelog`: a writer that can also be read back (``read``, ``end_offset``)
  and knows the offset the store reflects. Only a store whose changelog is restorable is
  restored and gets local checkpoints: :class:`~samzapy.kafka.changelog.KafkaChangelog` in a job,
  :class:`~samzapy.stores.memory_changelog.InMemoryChangelog` in tests.

The shared changelogs for the cases that must not write: ``KafkaChangelog.read_only``
(standbys, tools, checks: a send raises :class:`ChangelogWriteRefused`, or is dropped with
``discard_writes=True``) and :class:`DiscardingChangelog` (a writer that drops every change).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

from samzapy.errors import StoreError
from samzapy.records import OffsetRecord

#: One record read back from a changelog: its offset, key and value (``None``: a tombstone).
ChangelogRecord = OffsetRecord


@runtime_checkable
class ChangelogWriter(Protocol):
    """Where a logged store sends its changes: a key and its new value (``None``: tombstone)."""

    def send(self, key: bytes, value: bytes | None) -> None:
        """Send one change (asynchronously; it is acknowledged when the producer is flushed)."""


@runtime_checkable
class RestorableChangelog(ChangelogWriter, Protocol):
    """A changelog partition a store can be restored from (see :mod:`samzapy.stores.restore`).

    ``send`` writes a change (the restore's trim writes go there too); ``read`` and
    ``end_offset`` read the partition back; ``offset`` is the offset of the last change the
    store reflects (what a commit checkpoints), ``set_known_offset`` tells it where a restore
    left the store; ``close_reader`` releases what reading holds.
    """

    topic: str
    partition: int

    def read(self, start: int, stop: int | None = None) -> Iterator[Sequence[ChangelogRecord]]:
        """Batches of records from offset ``start`` up to ``stop`` (exclusive) or the true end."""

    def end_offset(self) -> int:
        """The true end offset (last offset + 1; 0 when empty)."""

    def offset(self) -> int | None:
        """The changelog offset of the last change the store reflects (``None``: none)."""

    def set_known_offset(self, offset: int | None) -> None:
        """Record the offset a restore brought the store to."""

    def close_reader(self) -> None:
        """Release the reading resources (a later read opens them again)."""


class ChangelogWriteRefused(StoreError):
    """Something tried to write to a changelog opened read-only (a bug: readers never write)."""


class DiscardingChangelog:
    """A changelog writer that drops every change, counting them in :attr:`sent`.

    For a store that keeps its logged layer (so it behaves as in streaming: the same layers,
    the same coalescing) but must not send each write: the Spark replay publishes the final
    state once, at its end; benchmarks measure the layers without a broker. Not restorable.
    """

    def __init__(self) -> None:
        self.sent = 0

    def send(self, key: bytes, value: bytes | None) -> None:
        """Drop the change (counted)."""
        self.sent += 1

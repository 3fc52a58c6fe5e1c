"""samzapy's own record types, and the protocols of what reads and writes records.

The rest of samzapy speaks these, not a Kafka client's types: only :mod:`samzapy.kafka` (and
:mod:`samzapy.coordinator`, which speaks the group protocol) imports kafka-python, and
converts at its boundary. A lint rule (ruff's banned-api for ``kafka``) and
``tests/unit/test_kafka_seam.py`` keep it so.

* :class:`TopicPartition`: a partition of a topic. A ``NamedTuple``, equal to and hashing like
  a Kafka client's ``(topic, partition)`` tuple, so a dict keyed by one finds the other's.
* :class:`OffsetRecord` and :class:`Record`: a record read back from a partition (the few
  fields a changelog reader needs, and all of them).
* :class:`RecordSink`: where records are sent (the Kafka producer, the Spark replay's files,
  the test driver's collectors).
* :class:`RecordSource`: where the records of a partition are read from.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

#: The headers samzapy sends with a record: (name, value) pairs, in order; a name may repeat.
Headers = list[tuple[str, bytes]]
#: A read record's headers, as :attr:`Record.headers` gives them: like :data:`Headers`, but a
#: value may be ``None`` (Kafka allows a header without a value) and the pairs are read-only.
RecordHeaders = Sequence[tuple[str, bytes | None]]


class TopicPartition(NamedTuple):
    """One partition of a topic.

    >>> TopicPartition("pageviews", 3)
    TopicPartition(topic='pageviews', partition=3)
    >>> TopicPartition("pageviews", 3) == ("pageviews", 3)
    True
    """

    topic: str
    partition: int


class OffsetRecord(Protocol):
    """A record read back from a partition, as a changelog reader sees it.

    Its offset, key and value (``None``: a tombstone). Every :class:`Record` is one.
    """

    @property
    def offset(self) -> int:
        """The record's offset in its partition."""

    @property
    def key(self) -> bytes | None:
        """The record's key bytes (``None``: no key)."""

    @property
    def value(self) -> bytes | None:
        """The record's value bytes (``None``: a tombstone)."""


class Record(OffsetRecord, Protocol):
    """A record read from a partition, with everything a consumer learns about it."""

    @property
    def topic(self) -> str:
        """The topic it was read from."""

    @property
    def partition(self) -> int:
        """The partition it was read from."""

    @property
    def timestamp(self) -> int:
        """Its timestamp, in milliseconds since the epoch."""

    @property
    def headers(self) -> RecordHeaders:
        """Its headers, in order."""

    @property
    def serialized_key_size(self) -> int:
        """The key's size in bytes (-1: no key)."""

    @property
    def serialized_value_size(self) -> int:
        """The value's size in bytes (-1: a tombstone)."""


class RecordSink(Protocol):
    """Where records are sent.

    The Kafka producer, the Spark replay's output files, the test driver's collectors. ``send``
    may be asynchronous; ``flush`` returns once everything sent before it is durable (or
    raises); ``acked_offset`` is the last offset acknowledged for a partition, ``None`` when the
    sink has no offsets or none was acknowledged yet.
    """

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Send one record (``value=None``: a tombstone)."""

    def flush(self) -> None:
        """Wait until every record sent so far is durable."""

    def acked_offset(self, topic: str, partition: int) -> int | None:
        """The highest acknowledged offset of ``topic``/``partition`` (``None``: none)."""

    def close(self) -> None:
        """Release what the sink holds (flush first: what was not flushed may be lost)."""


class RecordSource(Protocol):
    """Where the records of a partition are read from (a Kafka consumer in a job)."""

    def read(
        self, tp: TopicPartition, start: int, stop: int | None = None
    ) -> Iterator[Sequence[OffsetRecord]]:
        """Batches of the records of ``tp`` from offset ``start``.

        Batches of the records of ``tp`` from offset ``start`` up to ``stop`` (exclusive) or the
        partition's end, in offset order.
        """

    def end_offset(self, tp: TopicPartition) -> int:
        """The offset the next record of ``tp`` will get (0: empty)."""

    def close(self) -> None:
        """Release what reading holds (a later read opens it again)."""

"""The consumer the rest of samzapy gets: kafka-python's, taking samzapy's partition ids.

kafka-python checks ``isinstance(p, kafka.TopicPartition)`` in ``seek``, ``highwater``,
``pause`` and others; samzapy's own :class:`~samzapy.records.TopicPartition` is an equal
``NamedTuple`` but not that class. :class:`Consumer` converts the partitions its callers pass,
so code outside :mod:`samzapy.kafka` never imports kafka-python. What it returns (the keys of
``poll``, ``end_offsets``) stays kafka-python's: those compare and hash equal to samzapy's, so
a lookup with either finds the entry.

Also here: the client errors and settings other rooms need by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kafka
from kafka import KafkaConsumer
from kafka import TopicPartition as _KafkaPartition
from kafka.errors import OffsetOutOfRangeError

__all__ = ["Consumer", "OffsetOutOfRangeError", "accepted_settings", "kafka_partition"]

_CLIENTS = {"consumer": "KafkaConsumer", "producer": "KafkaProducer"}
#: Settings samzapy's own client wrappers take besides kafka-python's: the producer bounds
#: what it holds unacknowledged (``buffer.memory``, :mod:`samzapy.kafka.producer`).
_OWN = {"consumer": frozenset[str](), "producer": frozenset({"buffer_memory"})}


def kafka_partition(tp: tuple[str, int]) -> Any:
    """kafka-python's ``TopicPartition`` for ``tp`` (any ``(topic, partition)`` tuple)."""
    return tp if type(tp) is _KafkaPartition else _KafkaPartition(tp[0], tp[1])


def _each(partitions: Iterable[tuple[str, int]]) -> list[Any]:
    return [kafka_partition(tp) for tp in partitions]


def accepted_settings(role: str) -> frozenset[str]:
    """The setting names kafka-python's client for ``role`` (``consumer``, ``producer``) accepts."""
    return frozenset(getattr(kafka, _CLIENTS[role]).DEFAULT_CONFIG) | _OWN[role]


class Consumer(KafkaConsumer):  # type: ignore[misc]  # kafka-python ships no types
    """A ``KafkaConsumer`` that takes samzapy's partition ids.

    A ``KafkaConsumer`` whose partition arguments may be samzapy's
    :class:`~samzapy.records.TopicPartition`s (see the module doc). Settings as
    ``KafkaConsumer``'s; build one with :func:`samzapy.kafka.reading.reader_consumer`.
    """

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Assign exactly ``partitions`` (no group)."""
        super().assign(_each(partitions))

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """Fetch ``partition`` from ``offset`` at the next poll."""
        super().seek(kafka_partition(partition), offset)

    def highwater(self, partition: tuple[str, int]) -> int | None:
        """The end offset the last fetch of ``partition`` reported (``None``: no fetch yet)."""
        result: int | None = super().highwater(kafka_partition(partition))
        return result

    def position(self, partition: tuple[str, int], timeout_ms: int | None = None) -> int | None:
        """The offset of the next record of ``partition`` a poll returns."""
        result: int | None = super().position(kafka_partition(partition), timeout_ms=timeout_ms)
        return result

    def pause(self, *partitions: tuple[str, int]) -> None:
        """Stop fetching ``partitions`` until :meth:`resume`."""
        super().pause(*_each(partitions))

    def resume(self, *partitions: tuple[str, int]) -> None:
        """Fetch ``partitions`` again."""
        super().resume(*_each(partitions))

    def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: int | None = None
    ) -> dict[tuple[str, int], int]:
        """The first offset of each of ``partitions``."""
        offsets: dict[tuple[str, int], int] = super().beginning_offsets(
            _each(partitions), timeout_ms=timeout_ms
        )
        return offsets

    def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: int | None = None
    ) -> dict[tuple[str, int], int]:
        """The reported end offset of each of ``partitions`` (see :mod:`samzapy.kafka.reading`)."""
        offsets: dict[tuple[str, int], int] = super().end_offsets(_each(partitions), timeout_ms=timeout_ms)
        return offsets

    def offsets_for_times(
        self, timestamps: Mapping[tuple[str, int], int], timeout_ms: int | None = None
    ) -> Any:
        """The earliest offset at or after each timestamp (``None`` where there is none)."""
        converted = {kafka_partition(tp): ts for tp, ts in timestamps.items()}
        return super().offsets_for_times(converted, timeout_ms=timeout_ms)

"""What Kafka's log compaction leaves of a partition, computed from its records.

The dev broker never compacts, so without this no test would see what a compacted checkpoint
topic or changelog holds; samzapy's readers must reach the same state from the compacted log
as from the full one (issue 28 items 1-2). :func:`compact` applies the log cleaner's rules to
one partition's records, in offset order:

* of the records of each key, only the newest (highest offset) stays; offsets do not change,
  so a compacted partition has gaps;
* a tombstone (``value is None``) that is its key's newest record stays until the topic's
  ``delete.retention.ms`` has passed (``drop_tombstones=False`` models a read inside that
  window), then it goes too;
* transactions: records of aborted transactions go (``aborted``); transaction markers
  (control records, ``is_control`` true) go once the retention has passed, as tombstones do.
  kafka-python never hands markers to a reader, so records read back have none; the rule is
  here for records built by hand;
* only the part of the log below ``upto`` is cleaned (Kafka never cleans the active segment):
  records at or past it all stay, and the cleaner does not look at them (a record below
  ``upto`` goes only for a newer record of its key below ``upto``);
* records without a key stay (a compacted topic refuses them, so they only appear in
  hand-built logs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

R = TypeVar("R")


def compact(
    records: Iterable[R],
    *,
    upto: int | None = None,
    drop_tombstones: bool = True,
    aborted: Callable[[R], bool] | None = None,
) -> list[R]:
    """The records of one partition that survive compaction, in offset order (see module doc).

    ``records``: every record of the partition in offset order, each with ``offset``, ``key``
    and ``value`` (and optionally ``is_control``).

    >>> from collections import namedtuple
    >>> R = namedtuple("R", "offset key value")
    >>> log = [R(0, b"a", b"1"), R(1, b"b", b"1"), R(2, b"a", b"2"), R(3, b"b", None), R(4, b"c", b"1")]
    >>> [r.offset for r in compact(log)]
    [2, 4]
    >>> [r.offset for r in compact(log, drop_tombstones=False)]
    [2, 3, 4]
    >>> [r.offset for r in compact(log, upto=3)]
    [1, 2, 3, 4]
    """
    kept = [r for r in records if aborted is None or not aborted(r)]
    newest: dict[Any, int] = {}
    for record in kept:
        below = upto is None or record.offset < upto  # type: ignore[attr-defined]
        if below and getattr(record, "key", None) is not None:
            newest[record.key] = record.offset  # type: ignore[attr-defined]
    return [r for r in kept if _survives(r, newest, upto, drop_tombstones)]


def _survives(record: Any, newest: dict[Any, int], upto: int | None, drop_tombstones: bool) -> bool:
    if upto is not None and record.offset >= upto:
        return True  # the active segment: never cleaned
    if getattr(record, "is_control", False):
        return not drop_tombstones
    if record.key is None:
        return True
    if newest[record.key] != record.offset:
        return False  # a newer record of the key exists
    return record.value is not None or not drop_tombstones


def compact_partitions(records: Sequence[R], **rules: Any) -> list[R]:
    """:func:`compact` applied to each partition of ``records`` apart.

    ``records`` have a ``partition`` attribute, as a consumer returns them. Returns the
    survivors of all partitions, each partition's in offset order, partitions in the order they
    first appear.
    """
    by_partition: dict[int, list[R]] = {}
    for record in records:
        by_partition.setdefault(record.partition, []).append(record)  # type: ignore[attr-defined]
    survivors: list[R] = []
    for part in by_partition.values():
        survivors.extend(compact(sorted(part, key=_offset), **rules))
    return survivors


def _offset(record: Any) -> int:
    return int(record.offset)

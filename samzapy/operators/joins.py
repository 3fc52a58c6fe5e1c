"""Table-table and stream-table joins.

The windowed stream-stream join is in :mod:`samzapy.operators.stream_join`, and the
Photon-style registry (each event joined at most once ever) in
:mod:`samzapy.operators.registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from samzapy.stores.base import KeyValueStore

Joiner = Callable[[Any, Any], Any]


@dataclass(frozen=True, slots=True)
class TableChange:
    """A change of a joined table.

    ``value`` is the joined record, or ``None`` to retract (delete) the key's joined record.
    """

    key: Any
    value: Any


_EXISTS: dict[str, Callable[[bool, bool], bool]] = {
    "inner": lambda left, right: left and right,
    "left": lambda left, _right: left,
    "outer": lambda left, right: left or right,
}


class TableTableJoin:
    """The join of two tables (latest value per key of each side), updated on every change.

    A joined record exists for a key when both sides do (``inner``), when the left does
    (``left``; the right side is ``None`` when absent) or when either does (``outer``).
    After an update of one side (``None`` deletes):

    * if a joined record exists now: returns ``TableChange(key, joiner(left, right))``;
    * else if one existed before: returns ``TableChange(key, None)``, a retraction;
    * else: returns ``None`` (nothing to emit).

    The stores hold the latest value of each side, with whatever serdes they are configured
    with (keys and values are passed through). Sending each change keyed by ``key`` (a
    compacted topic) makes the output the joined table. ``joiner`` must not return ``None``.

    Event time (``time_of``, issue 19): given a function that reads the event time of a stored
    value, an update with a ``time_ms`` older than the value held for its key and side is
    *stale*: it is ignored (nothing stored, ``None`` returned), so the table holds each key's
    newest version whatever order the updates came in (Kafka Streams' versioned tables). A
    delete forgets the time of the version it removes.
    """

    def __init__(
        self,
        left_store: KeyValueStore[Any, Any],
        right_store: KeyValueStore[Any, Any],
        joiner: Joiner,
        kind: Literal["inner", "left", "outer"] = "inner",
        *,
        time_of: Callable[[Any], int] | None = None,
    ) -> None:
        _check_kind(kind, _EXISTS)
        self._left, self._right = left_store, right_store
        self._joiner = joiner
        self._exists = _EXISTS[kind]
        self._time_of = time_of

    def stale(self, side: Literal["left", "right"], key: Any, time_ms: int | None) -> bool:
        """Whether an update of ``side`` at ``time_ms`` is older than the version held."""
        if self._time_of is None or time_ms is None:
            return False
        held = (self._left if side == "left" else self._right).get(key)
        return held is not None and time_ms < self._time_of(held)

    def update_left(self, key: Any, value: Any, time_ms: int | None = None) -> TableChange | None:
        """Set (or with ``None`` delete) the left value of ``key``.

        The change to emit (``None`` also for a stale update, which is ignored).
        """
        if self.stale("left", key, time_ms):
            return None
        old = self._left.get(key)
        self._left.put(key, value)
        right = self._right.get(key)
        return self._change(key, (old, right), (value, right))

    def update_right(self, key: Any, value: Any, time_ms: int | None = None) -> TableChange | None:
        """Set (or with ``None`` delete) the right value of ``key``.

        The change to emit (``None`` also for a stale update, which is ignored).
        """
        if self.stale("right", key, time_ms):
            return None
        old = self._right.get(key)
        self._right.put(key, value)
        left = self._left.get(key)
        return self._change(key, (left, old), (left, value))

    def _change(self, key: Any, before: tuple[Any, Any], after: tuple[Any, Any]) -> TableChange | None:
        if self._exists(after[0] is not None, after[1] is not None):
            return TableChange(key, self._joiner(*after))
        if self._exists(before[0] is not None, before[1] is not None):
            return TableChange(key, None)
        return None


class StreamTableJoin:
    """Enriches stream records with the latest table value of their key.

    The table is fed by :meth:`update_table` (``None`` deletes), typically from a bootstrap
    stream read to its head before the other inputs. :meth:`join` returns
    ``joiner(stream_value, table_value)``; with ``kind="inner"`` it returns ``None`` when the
    key has no table value (drop or count it), with ``"left"`` the joiner gets ``None``.
    ``joiner`` must not return ``None``. Keys and values use the store's serdes.
    """

    def __init__(
        self, table_store: KeyValueStore[Any, Any], joiner: Joiner, kind: Literal["inner", "left"] = "inner"
    ) -> None:
        _check_kind(kind, {"inner": None, "left": None})
        self._table = table_store
        self._joiner = joiner
        self._inner = kind == "inner"

    def update_table(self, key: Any, value: Any) -> None:
        """Set (or with ``None`` delete) the table value of ``key``."""
        self._table.put(key, value)

    def join(self, key: Any, stream_value: Any) -> Any | None:
        """The joined record for a stream record, or ``None`` (inner join, no table value)."""
        table_value = self._table.get(key)
        if table_value is None and self._inner:
            return None
        return self._joiner(stream_value, table_value)


def _check_kind(kind: str, allowed: dict[str, Any]) -> None:
    if kind not in allowed:
        msg = f"join kind must be one of {sorted(allowed)}, got {kind!r}"
        raise ValueError(msg)

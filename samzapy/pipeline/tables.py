"""Tables in a pipeline: :class:`Table` and :class:`GlobalTable`.

:class:`Table` is the latest value of each key of a topic, with the table-table and foreign-key
joins; :class:`GlobalTable` is a side input every task holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samzapy.pipeline.graph import (
    Node,
    PipelineError,
    _caller,
    _check_copartitioned,
    _check_fn,
    _check_kind,
    _pair,
)

if TYPE_CHECKING:
    from samzapy.pipeline.api import App, Stream


class Table:
    """A table in a pipeline: the latest value of each key, kept in a store."""

    def __init__(self, app: App, node: Node) -> None:
        self.app = app
        self.node = node

    def join(
        self,
        other: Table,
        joiner: Callable[..., Any] | None = None,  # (left, right); (key, left, right) with with_key
        *,
        kind: str = "inner",
        foreign_key: Callable[[Any], Any] | None = None,
        name: str | None = None,
        with_key: bool = False,
    ) -> Table:
        """The table-table join: a joined value per key, updated (or deleted) on every change of either side.

        ``kind`` is ``inner``, ``left`` or ``outer``.

        With ``foreign_key=fn``, the foreign-key join (Kafka Streams' KIP-213): each row of
        this table joins the row of ``other`` whose key is ``fn(value)``; the tables need not
        be partitioned alike (the two halves talk through two intermediate topics); ``kind``
        is ``inner`` or ``left``.

        ``joiner(left, right)`` makes the joined value (``joiner(key, left, right)`` with
        ``with_key=True``); the joined table is kept in the store ``<name>-joined``. Output ids
        are named after the stage (``name``): see docs/pipelines.md, "Ids and stores of the
        joins".
        """
        where = _caller()
        if with_key and joiner is None:
            msg = f"{where}: join(..., with_key=True) needs a joiner(key, left, right)"
            raise PipelineError(msg)
        if foreign_key is not None:
            _check_fn(foreign_key, "join", where)
            _check_kind(kind, ("inner", "left"), where)
            node = self.app._add(
                "fk_join",
                (self.node, other.node),
                where,
                name=name,
                args={
                    "joiner": joiner or _pair,
                    "kind": kind,
                    "foreign_key": foreign_key,
                    "with_key": with_key,
                },
                partitions=self.node.partitions,
                key_serde=self.node.key_serde,
            )
            return Table(self.app, node)
        _check_copartitioned((self, other), "join", where, require_keys=True)
        _check_kind(kind, ("inner", "left", "outer"), where)
        node = self.app._add(
            "table_table_join",
            (self.node, other.node),
            where,
            name=name,
            args={"joiner": joiner or _pair, "kind": kind, "with_key": with_key},
            partitions=self.node.partitions,
            key_serde=self.node.key_serde,
        )
        return Table(self.app, node)

    def to_stream(self) -> Stream:
        """The table's changes as a stream (a deletion is a ``None`` value)."""
        from samzapy.pipeline.api import Stream  # the streams module builds tables too

        where = _caller()
        node = self.app._add(
            "changes", (self.node,), where, partitions=self.node.partitions, key_serde=self.node.key_serde
        )
        return Stream(self.app, node)

    def to(self, topic: str) -> Stream:
        """Send every change to ``topic`` (a compacted topic then holds the table)."""
        return self.to_stream().to(topic)


class GlobalTable:
    """A table every task holds whole (a side input)."""

    def __init__(self, app: App, node: Node) -> None:
        self.app = app
        self.node = node

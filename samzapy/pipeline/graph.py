"""The stage graph of a pipeline.

Its nodes (:class:`Node`), the user's line of each (:class:`Where`), the pipeline's error, and
the checks shared by streams and tables, which refuse a mistake at the user's line when the
stage is written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samzapy.errors import ConfigError
from samzapy.pipeline.specs import Aggregation, SerdeLike, json, serde_name, string

_HERE = str(Path(__file__).resolve().parent) + "/"


class PipelineError(ConfigError):
    """A pipeline that cannot run as written; the message starts with the user's file:line."""


@dataclass(frozen=True)
class Where:
    """The user's line that wrote a stage."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


def _caller() -> Where:
    """The first frame outside samzapy.pipeline: the user's line."""
    frame = sys._getframe(1)
    while frame.f_back is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_HERE):
        frame = frame.f_back
    return Where(frame.f_code.co_filename, frame.f_lineno)


def function_where(fn: Any) -> str:
    """``file.py:line`` where a user function is defined (``?`` when it has no code)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return "?"
    return f"{Path(code.co_filename).name}:{code.co_firstlineno}"


@dataclass(frozen=True)
class StoreSpec:
    """A store a :meth:`Stream.process` function gets, with its serdes."""

    name: str
    key: str = "string"
    value: str = "json"


def store(name: str, *, key: SerdeLike = string, value: SerdeLike = json) -> StoreSpec:
    """A store for :meth:`Stream.process`: ``store("counts", value=samzapy.long)``."""
    where = _caller()
    return StoreSpec(
        name, serde_name(key, "key", where) or "string", serde_name(value, "value", where) or "json"
    )


@dataclass(eq=False)
class Node:
    """One stage of the graph: its kind, inputs, the user's line, name and arguments.

    ``keyed`` says whether the stream out of this stage is partitioned by its key (a
    Kafka-keyed source, or after a repartitioning ``key_by``); ``partitions`` is the declared
    partition count, when one was given.
    """

    id: int
    kind: str
    parents: tuple[Node, ...]
    where: Where
    name: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    keyed: bool = True
    partitions: int | None = None
    key_serde: str | None = "string"
    value_serde: str | None = "json"

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.kind!r}, {self.where})"


def _timestamp(timestamp: str | Callable[[Any], int] | None, where: Where) -> Callable[[Any], int] | None:
    if timestamp is None or callable(timestamp):
        return timestamp
    if isinstance(timestamp, str):
        name = timestamp

        def field_time(value: Any) -> int:
            try:
                event_ms: int = value[name]
            except (LookupError, TypeError) as exc:  # not a dict (e.g. a str serde), no such field
                shown = repr(value if len(repr(value)) <= 60 else f"{repr(value)[:57]}...")
                msg = (
                    f"timestamp={name!r} (at {where}): the value has no field {name!r} to read the "
                    f"event time from (a {type(value).__name__}: {shown}); read the source's "
                    "values as JSON objects (value=samzapy.json), or give timestamp= a function "
                    "of the value"
                )
                raise LookupError(msg) from exc
            return event_ms

        field_time.__qualname__ = f"timestamp field {name!r}"
        field_time.field = name  # type: ignore[attr-defined]  # read directly on the hot path
        return field_time
    # unreachable for typed callers; user code is not type-checked
    msg = (  # type: ignore[unreachable]
        f"{where}: timestamp= must be a field name or a function of the value, got {timestamp!r}"
    )
    raise PipelineError(msg)


def _check_fn(fn: Any, op: str, where: Where) -> None:
    if not callable(fn):
        msg = f"{where}: {op}() needs a function, got {type(fn).__name__} {fn!r}"
        raise PipelineError(msg)


#: Stages that pass values on unchanged.
_PASSING = frozenset({"filter", "to", "sink", "dedup", "branch", "branch_out"})
#: Serdes that can carry a dict or a list.
_STRUCTURED = frozenset({"json", None})


def _check_value_serde(node: Node, serde: str | None, topic: str, where: Where) -> None:
    """Refuse, at the user's line, writing values the graph knows are dicts or lists with a serde that cannot.

    Such values are window results and default join pairs.
    """
    while node.kind in _PASSING and node.parents:
        node = node.parents[0]
    made = None
    if node.kind == "window":
        made = "window results (dicts)"
    elif node.kind.endswith("join") and node.args.get("joiner") is _pair:
        made = "join pairs (lists)"
    builtin = serde in ("string", "long", "integer", "bytes")
    if made is not None and serde not in _STRUCTURED and builtin:
        msg = (
            f"{where}: to('{topic}') with the {serde} serde cannot write the {made} of the "
            f"{node.kind}() at {node.where}: use value=samzapy.json, or map() them to what {serde} takes"
        )
        raise PipelineError(msg)


def _pair(left: Any, right: Any) -> Any:
    return [left, right]


def _key_of_record(value: Any) -> Any:
    return None


def _default_count() -> Aggregation:
    from samzapy.pipeline.specs import count

    return count()


def _check_kind(kind: str, allowed: tuple[str, ...], where: Where) -> None:
    if kind not in allowed:
        msg = f"{where}: join kind must be one of {', '.join(allowed)}, got {kind!r}"
        raise PipelineError(msg)


def source_roots(node: Node) -> list[Node]:
    """The sources whose partitions a stream's records are in.

    Through merges and joins, not beyond a ``key_by`` (its records are in the intermediate
    topic's partitions) nor into a global table (every task has all of it).
    """
    found: dict[int, Node] = {}
    todo = [node]
    while todo:
        current = todo.pop()
        if current.kind in ("source", "table"):
            found.setdefault(current.id, current)
        elif current.kind not in ("key_by", "global_table"):
            todo.extend(current.parents)
    return sorted(found.values(), key=lambda n: n.id)


def merge_on_path(node: Node) -> Node | None:
    """The nearest ``merge`` upstream of ``node`` (``node`` itself included), not beyond a ``key_by``.

    ``None`` when there is none.
    """
    todo = [node]
    while todo:
        current = todo.pop(0)
        if current.kind == "merge":
            return current
        if current.kind != "key_by":
            todo.extend(current.parents)
    return None


def _check_copartitioned(streams: Iterable[Any], op: str, where: Where, *, require_keys: bool) -> None:
    """Refuse a join, or a keyed stage after a merge, over streams that are not partitioned alike.

    Compared are the declared ``partitions=`` of the sources they read, through merges.
    """
    streams = list(streams)
    if require_keys:
        for s in streams:
            if not s.node.keyed:
                msg = (
                    f"{where}: {op}() needs streams partitioned by their keys, and the stream of "
                    f"{s.node.kind} at {s.node.where} has no keys: call key_by(fn) on it first"
                )
                raise PipelineError(msg)
    roots = {r.id: r for s in streams for r in source_roots(s.node)}.values()
    declared = [r for r in roots if r.partitions is not None]
    if len({r.partitions for r in declared}) > 1:
        said = ", ".join(f"'{r.args['topic']}' at {r.where}: {r.partitions}" for r in declared)
        merge = next((m for m in (merge_on_path(s.node) for s in streams) if m is not None), None)
        through = f" (merged at {merge.where})" if merge is not None else ""
        msg = (
            f"{where}: {op}() of streams with different partition counts{through} ({said}): a key "
            "would be in different tasks; make the topics' partition counts equal, or key_by "
            "the stream (it then moves to an intermediate topic with the job's partition count)"
        )
        raise PipelineError(msg)

"""The pipeline builder: :class:`App`, :class:`Stream` and :class:`Table`.

Building a pipeline records a graph of stages (:class:`Node`), each with the user's
``file:line`` (:class:`Where`); nothing runs and nothing connects. Mistakes that the graph
already shows (a window on an unkeyed stream, a join of streams partitioned differently) are
refused at the user's line, when the stage is written. :meth:`App.plan` compiles the graph
(:mod:`samzapy.pipeline.compiler`) onto samzapy's task model.

>>> app = App("demo")
>>> views = app.stream("pageviews")
>>> from samzapy.pipeline.specs import count
>>> counts = views.key_by(lambda v: v["user"]).window(tumbling(hours=1), count())
>>> [n.kind for n in app.nodes]
['source', 'key_by', 'window']
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samzapy.errors import ConfigError
from samzapy.pipeline.specs import Aggregation, SerdeName, WindowSpec, json, serde_name, string, tumbling

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


def store(name: str, *, key: SerdeName | str = string, value: SerdeName | str = json) -> StoreSpec:
    """A store for :meth:`Stream.process`: ``store("counts", value=samzapy.long)``."""
    return StoreSpec(name, serde_name(key, "key") or "string", serde_name(value, "value") or "json")


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


class App:
    """A pipeline application: its name (the job's ``job.name``), its sources and stages.

    Args:
        name: the job name; stores, intermediate and changelog topics are named after it.
        broker: bootstrap servers; ``embedded`` (default) is the dev broker.
        config: extra job properties (``task.commit.ms``, metrics...), as a dict.
        partitions: the partition count of intermediate topics when it cannot be learnt
            from the inputs (in tests; a run asks the broker).
    """

    def __init__(
        self,
        name: str,
        *,
        broker: str = "embedded",
        config: dict[str, Any] | None = None,
        partitions: int | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            msg = f"App needs a name (the job name), got {name!r}"
            raise PipelineError(msg)
        self.name = name
        self.broker = broker
        self.config = dict(config or {})
        self.partitions = partitions
        self.where = _caller()
        self.nodes: list[Node] = []
        self._plan: Any = None

    def _add(self, kind: str, parents: Iterable[Node], where: Where, **fields: Any) -> Node:
        node = Node(len(self.nodes), kind, tuple(parents), where, **fields)
        self.nodes.append(node)
        self._plan = None
        return node

    def stream(
        self,
        topic: str,
        *,
        key: SerdeName | str | None = string,
        value: SerdeName | str | None = json,
        timestamp: str | Callable[[Any], int] | None = None,
        partitions: int | None = None,
    ) -> Stream:
        """A stream of the records of ``topic``.

        Args:
            key: the key serde; ``None`` for records without keys (unkeyed: key_by first
                before a window or a join).
            value: the value serde (``samzapy.json`` by default).
            timestamp: the record's event time: a field name, a function of the value, or
                ``None`` for the Kafka record timestamp.
            partitions: the topic's partition count, when you want joins and merges checked
                against it before the job starts.
        """
        where = _caller()
        node = self._add(
            "source",
            (),
            where,
            name=topic,
            args={"topic": topic, "timestamp": _timestamp(timestamp, where)},
            keyed=key is not None,
            partitions=partitions,
            key_serde=serde_name(key, "key"),
            value_serde=serde_name(value, "value"),
        )
        return Stream(self, node)

    def table(
        self,
        topic: str,
        *,
        key: SerdeName | str = string,
        value: SerdeName | str = json,
        name: str | None = None,
        timestamp: str | Callable[[Any], int] | None = None,
        versioned: int | None = None,
        partitions: int | None = None,
    ) -> Table:
        """A table: the latest value of each key of ``topic`` (a ``None`` value deletes),
        kept in a store named ``name`` (default: the topic's name).

        ``versioned=history_ms`` keeps every version for that long, so a stream joined with
        it gets the version valid at each record's event time (``timestamp=`` of the table).
        """
        where = _caller()
        node = self._add(
            "table",
            (),
            where,
            name=name or topic,
            args={"topic": topic, "timestamp": _timestamp(timestamp, where), "versioned": versioned},
            partitions=partitions,
            key_serde=serde_name(key, "key"),
            value_serde=serde_name(value, "value"),
        )
        return Table(self, node)

    def global_table(
        self,
        topic: str,
        *,
        key: SerdeName | str = string,
        value: SerdeName | str = json,
        name: str | None = None,
    ) -> GlobalTable:
        """A table of every partition of ``topic`` in every task (a side input, read to its
        end before processing starts): join a stream with it by any key (``on=``)."""
        where = _caller()
        node = self._add(
            "global_table",
            (),
            where,
            name=name or topic,
            args={"topic": topic},
            keyed=False,
            key_serde=serde_name(key, "key"),
            value_serde=serde_name(value, "value"),
        )
        return GlobalTable(self, node)

    def plan(self) -> Any:
        """The compiled plan (:class:`samzapy.pipeline.compiler.Plan`), built once."""
        if self._plan is None:
            from samzapy.pipeline.compiler import compile_app

            self._plan = compile_app(self)
        return self._plan


def _timestamp(timestamp: str | Callable[[Any], int] | None, where: Where) -> Callable[[Any], int] | None:
    if timestamp is None or callable(timestamp):
        return timestamp
    if isinstance(timestamp, str):
        name = timestamp

        def field_time(value: Any) -> int:
            return value[name]

        field_time.__qualname__ = f"timestamp field {name!r}"
        field_time.field = name  # type: ignore[attr-defined]  # read directly on the hot path
        return field_time
    msg = f"{where}: timestamp= must be a field name or a function of the value, got {timestamp!r}"
    raise PipelineError(msg)


def _check_fn(fn: Any, op: str, where: Where) -> None:
    if not callable(fn):
        msg = f"{where}: {op}() needs a function, got {type(fn).__name__} {fn!r}"
        raise PipelineError(msg)


class Stream:
    """A stream of keyed records in a pipeline. Every method adds a stage and returns the
    stream out of it (``to`` and ``sink`` return the stream they end, for more outputs)."""

    def __init__(self, app: App, node: Node) -> None:
        self.app = app
        self.node = node

    def _then(
        self, kind: str, where: Where, parents: tuple[Node, ...] | None = None, **fields: Any
    ) -> Stream:
        node = self.node
        fields.setdefault("keyed", node.keyed)
        fields.setdefault("partitions", node.partitions)
        fields.setdefault("key_serde", node.key_serde)
        fields.setdefault("value_serde", node.value_serde)
        return Stream(self.app, self.app._add(kind, parents or (node,), where, **fields))

    def map(self, fn: Callable[..., Any], *, with_key: bool = False) -> Stream:
        """Each value replaced by ``fn(value)`` (or ``fn(key, value)`` with ``with_key``); the
        key stays."""
        where = _caller()
        _check_fn(fn, "map", where)
        return self._then("map", where, args={"fn": fn, "with_key": with_key})

    def filter(self, fn: Callable[[Any], bool]) -> Stream:
        """Only the records whose ``fn(value)`` is true."""
        where = _caller()
        _check_fn(fn, "filter", where)
        return self._then("filter", where, args={"fn": fn})

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> Stream:
        """Each record replaced by the values of ``fn(value)`` (same key), in order."""
        where = _caller()
        _check_fn(fn, "flat_map", where)
        return self._then("flat_map", where, args={"fn": fn})

    def key_by(
        self, fn: Callable[[Any], Any], *, name: str | None = None, key: SerdeName | str = string
    ) -> Stream:
        """Re-key each record by ``fn(value)``. The records move to the task of their new key
        through an intermediate topic (``<job>-<name>``) that the same job reads, so windows
        and joins after it see all of a key's records. ``name`` names the topic and the stage's
        store; give one to keep them when the pipeline changes."""
        where = _caller()
        _check_fn(fn, "key_by", where)
        return self._then(
            "key_by",
            where,
            name=name,
            args={"fn": fn},
            keyed=True,
            partitions=None,
            key_serde=serde_name(key, "key"),
        )

    partition_by = key_by

    def merge(self, *others: Stream) -> Stream:
        """One stream of this stream's records and the others' (their order between streams
        follows arrival)."""
        where = _caller()
        streams = (self, *others)
        return self._then("merge", where, parents=tuple(s.node for s in streams))

    def branch(self, *predicates: Callable[[Any], bool]) -> tuple[Stream, ...]:
        """One stream per predicate: a record goes to the first branch whose predicate holds
        (to none when none does)."""
        where = _caller()
        for fn in predicates:
            _check_fn(fn, "branch", where)
        split = self._then("branch", where, args={"predicates": predicates})
        return tuple(split._then("branch_out", where, args={"index": i}) for i in range(len(predicates)))

    def window(
        self,
        spec: WindowSpec | None = None,
        aggregation: Aggregation | None = None,
        *,
        grace: int = 0,
        emit: str = "final",
        early: int = 0,
        name: str | None = None,
        late_to: str | None = None,
    ) -> Stream:
        """Aggregate each key's records per event-time window.

        Args:
            spec: ``samzapy.tumbling(hours=1)``, ``hopping``, ``session``, ``sliding``,
                ``count_window`` (default: tumbling, one hour).
            aggregation: ``samzapy.count()`` (default), ``sum``, ``min``, ``max``,
                ``reduce``, ``aggregate(initializer, add)``.
            grace: how late (behind the newest time seen) a record may be and still count.
            emit: ``final`` (one result per window when it closes) or ``update`` (also a
                result on every change).
            early: also emit the changed windows' current results every that many ms.
            name: the stage's store name (default: a stable name from the stream).
            late_to: a topic for records too late for every window (default: counted, dropped).

        The stream out holds one record per result, keyed like the input, valued
        ``{"start": ms, "end": ms, "value": result}`` (with ``"final"`` unless
        ``emit="final"`` without ``early``).
        """
        where = _caller()
        if not self.node.keyed:
            msg = (
                f"{where}: window() needs a keyed stream, and this stream has no keys "
                f"(app.stream(..., key=None) at {self._source().where}): call key_by(fn) before it"
            )
            raise PipelineError(msg)
        if emit not in ("final", "update"):
            msg = f"{where}: window(emit=...) must be 'final' or 'update', got {emit!r}"
            raise PipelineError(msg)
        for what, value in (("grace", grace), ("early", early)):
            if not isinstance(value, int) or value < 0:
                msg = f"{where}: window({what}=...) must be ms >= 0 (samzapy.minutes(10)), got {value!r}"
                raise PipelineError(msg)
        args = {
            "spec": spec or tumbling(hours=1),
            "aggregation": aggregation or _default_count(),
            "grace": grace,
            "emit": emit,
            "early": early,
            "late_to": late_to,
        }
        return self._then("window", where, name=name, args=args, value_serde="json")

    def join(
        self,
        other: Stream | Table | GlobalTable,
        joiner: Callable[[Any, Any], Any] | None = None,
        *,
        kind: str = "inner",
        within: int | tuple[int, int] | None = None,
        grace: int = 0,
        on: Callable[[Any], Any] | None = None,
        ids: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None,
        once: bool = False,
        retention: int = 86_400_000,
        name: str | None = None,
    ) -> Stream:
        """Join with a table (the table's value for each record's key), a global table (the
        value for ``on(value)``) or another stream (records of the same key at most
        ``within`` ms apart; ``within=(before, after)`` for an asymmetric bound).

        ``joiner(left, right)`` makes the joined value (default: a pair ``[left, right]``);
        ``kind`` is ``inner`` or ``left`` (and ``outer`` for two streams).

        Two streams: ``grace`` is how far behind the newest time seen a record may be and still
        match; ``ids=(left_id, right_id)`` name each side's records (the result's id is the
        pair's; default: the record's input position); ``once=True`` decides each left record
        at most once ever (joined or, for a left join, unmatched: Photon's registry, kept for
        ``retention`` ms of event time), so a duplicate left record is dropped.
        """
        where = _caller()
        joiner = joiner or _pair
        _check_fn(joiner, "join", where)
        if isinstance(other, GlobalTable):
            if on is None:
                on = _key_of_record
            return self._then(
                "lookup",
                where,
                parents=(self.node, other.node),
                args={"joiner": joiner, "on": on, "kind": kind},
            )
        _check_copartitioned((self, other), "join", where, require_keys=True)
        if isinstance(other, Table):
            _check_kind(kind, ("inner", "left"), where)
            versioned = other.node.args.get("versioned")
            return self._then(
                "stream_table_join",
                where,
                parents=(self.node, other.node),
                name=name,
                args={"joiner": joiner, "kind": kind, "event_time": versioned is not None, "grace": grace},
            )
        if within is None:
            msg = f"{where}: a join of two streams needs within=ms (how far apart matching records may be)"
            raise PipelineError(msg)
        before, after = within if isinstance(within, tuple) else (within, within)
        _check_kind(kind, ("inner", "left", "outer"), where)
        return self._then(
            "stream_stream_join",
            where,
            parents=(self.node, other.node),
            name=name,
            args={
                "joiner": joiner,
                "kind": kind,
                "before": before,
                "after": after,
                "grace": grace,
                "ids": ids,
                "once": once,
                "retention": retention,
            },
        )

    def dedup(self, id_fn: Callable[[Any], Any], *, within: int, name: str | None = None) -> Stream:
        """Drop records whose ``id_fn(value)`` was seen in the last ``within`` ms of event
        time (per key: put ``key_by`` before it to dedup across keys)."""
        where = _caller()
        _check_fn(id_fn, "dedup", where)
        return self._then("dedup", where, name=name, args={"fn": id_fn, "within": within})

    def process(self, fn: Callable[[Any, Any], Any], *, stores: Iterable[StoreSpec | str] = ()) -> Stream:
        """The escape hatch: ``fn(record, ctx)`` for each record, with ``record.key``,
        ``record.value``, ``record.timestamp``, ``ctx.stores[name]`` (the stores named here,
        kept and restored like any other) and ``ctx.emit(value, key=...)`` to send records on."""
        where = _caller()
        _check_fn(fn, "process", where)
        specs = tuple(s if isinstance(s, StoreSpec) else StoreSpec(s) for s in stores)
        return self._then("process", where, args={"fn": fn, "stores": specs})

    def to(
        self, topic: str, *, key: SerdeName | str | None = None, value: SerdeName | str | None = None
    ) -> Stream:
        """Send every record to ``topic`` (created when missing), with the stream's serdes
        unless given."""
        where = _caller()
        value_serde = serde_name(value, "value") or self.node.value_serde
        _check_value_serde(self.node, value_serde, topic, where)
        return self._then(
            "to",
            where,
            args={
                "topic": topic,
                "key_serde": serde_name(key, "key") or self.node.key_serde,
                "value_serde": value_serde,
            },
        )

    def sink(self, fn: Callable[[Any, Any], Any]) -> Stream:
        """Call ``fn(key, value)`` for every record (e.g. to write to a database). Called again
        for records re-processed after a crash: make it idempotent."""
        where = _caller()
        _check_fn(fn, "sink", where)
        return self._then("sink", where, args={"fn": fn})

    def _source(self) -> Node:
        node = self.node
        while node.parents:
            node = node.parents[0]
        return node


class Table:
    """A table in a pipeline: the latest value of each key, kept in a store."""

    def __init__(self, app: App, node: Node) -> None:
        self.app = app
        self.node = node

    def join(
        self,
        other: Table,
        joiner: Callable[[Any, Any], Any] | None = None,
        *,
        kind: str = "inner",
        foreign_key: Callable[[Any], Any] | None = None,
        name: str | None = None,
    ) -> Table:
        """The table-table join: a joined value per key, updated (or deleted) on every change
        of either side; ``kind`` is ``inner``, ``left`` or ``outer``.

        With ``foreign_key=fn``, the foreign-key join (Kafka Streams' KIP-213): each row of
        this table joins the row of ``other`` whose key is ``fn(value)``; the tables need not
        be partitioned alike (the two halves talk through two intermediate topics); ``kind``
        is ``inner`` or ``left``."""
        where = _caller()
        if foreign_key is not None:
            _check_fn(foreign_key, "join", where)
            _check_kind(kind, ("inner", "left"), where)
            node = self.app._add(
                "fk_join",
                (self.node, other.node),
                where,
                name=name,
                args={"joiner": joiner or _pair, "kind": kind, "foreign_key": foreign_key},
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
            args={"joiner": joiner or _pair, "kind": kind},
            partitions=self.node.partitions,
        )
        return Table(self.app, node)

    def to_stream(self) -> Stream:
        """The table's changes as a stream (a deletion is a ``None`` value)."""
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


#: Stages that pass values on unchanged.
_PASSING = frozenset({"filter", "to", "sink", "dedup", "branch", "branch_out"})
#: Serdes that can carry a dict or a list.
_STRUCTURED = frozenset({"json", None})


def _check_value_serde(node: Node, serde: str | None, topic: str, where: Where) -> None:
    """Refuse, at the user's line, writing values the graph knows are dicts or lists (window
    results, default join pairs) with a serde that cannot carry them."""
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


def _check_copartitioned(streams: Iterable[Any], op: str, where: Where, *, require_keys: bool) -> None:
    """Refuse a join or merge of streams that are not partitioned alike."""
    streams = list(streams)
    if require_keys:
        for s in streams:
            if not s.node.keyed:
                msg = (
                    f"{where}: {op}() needs streams partitioned by their keys, and the stream of "
                    f"{s.node.kind} at {s.node.where} has no keys: call key_by(fn) on it first"
                )
                raise PipelineError(msg)
    counts = {s.node.partitions for s in streams if s.node.partitions is not None}
    if len(counts) > 1:
        said = ", ".join(f"{s.node.where}: {s.node.partitions}" for s in streams if s.node.partitions)
        msg = (
            f"{where}: {op}() of streams with different partition counts ({said}): a key would be "
            "in different tasks on each side; make the topics' partition counts equal, or key_by "
            "one side (it then moves to an intermediate topic with the job's partition count)"
        )
        raise PipelineError(msg)

"""The pipeline builder: :class:`App`, :class:`Stream` and :class:`Table`.

Building a pipeline records a graph of stages (:class:`Node`), each with the user's
``file:line`` (:class:`Where`); nothing runs and nothing connects. Mistakes that the graph
already shows (a window on an unkeyed stream, a join of streams partitioned differently) are
refused at the user's line, when the stage is written. :meth:`App.plan` compiles the graph
(:mod:`samzapy.pipeline.compiler`) onto samzapy's task model.

Examples:
    >>> app = App("demo")
    >>> views = app.stream("pageviews")
    >>> from samzapy.pipeline.specs import count
    >>> counts = views.key_by(lambda v: v["user"]).window(tumbling(hours=1), count())
    >>> [n.kind for n in app.nodes]
    ['source', 'key_by', 'window']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from samzapy.pipeline.graph import (
    Node,
    PipelineError,
    StoreSpec,
    Where,
    _caller,
    _check_copartitioned,
    _check_fn,
    _check_kind,
    _check_value_serde,
    _default_count,
    _key_of_record,
    _pair,
    _timestamp,
    function_where,
    source_roots,
    store,
)
from samzapy.pipeline.specs import Aggregation, SerdeLike, WindowSpec, json, serde_name, string, tumbling
from samzapy.pipeline.tables import GlobalTable, Table

#: What a job, stage or topic name may hold (Kafka's topic characters).
_NAME = re.compile(r"[A-Za-z0-9._-]+")

__all__ = [
    "App",
    "GlobalTable",
    "Node",
    "PipelineError",
    "StoreSpec",
    "Stream",
    "Table",
    "Where",
    "function_where",
    "store",
]


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
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            msg = (
                f"{_caller()}: App needs a name (the job name, part of its topics' names): letters, "
                f"digits, '.', '_' and '-', got {name!r}"
            )
            raise PipelineError(msg)
        self.name = name
        self.broker = broker
        self.config = dict(config or {})
        self.partitions = partitions
        self.where = _caller()
        self.nodes: list[Node] = []
        self._plan: Any = None

    def _add(self, kind: str, parents: Iterable[Node], where: Where, **fields: Any) -> Node:
        name = fields.get("name")
        if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
            msg = f"{where}: name= names stores and topics: letters, digits, '.', '_' and '-', got {name!r}"
            raise PipelineError(msg)
        node = Node(len(self.nodes), kind, tuple(parents), where, **fields)
        self.nodes.append(node)
        self._plan = None
        return node

    def stream(
        self,
        topic: str,
        *,
        key: SerdeLike | None = string,
        value: SerdeLike | None = json,
        timestamp: str | Callable[[Any], int] | None = None,
        partitions: int | None = None,
    ) -> Stream:
        """A stream of the records of ``topic``.

        Args:
            topic: the Kafka topic to read.
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
            key_serde=serde_name(key, "key", where),
            value_serde=serde_name(value, "value", where),
        )
        return Stream(self, node)

    def table(
        self,
        topic: str,
        *,
        key: SerdeLike = string,
        value: SerdeLike = json,
        name: str | None = None,
        timestamp: str | Callable[[Any], int] | None = None,
        versioned: int | None = None,
        partitions: int | None = None,
        map_values: Callable[[Any], Any] | None = None,
        bootstrap: bool = False,
    ) -> Table:
        """A table: the latest value of each key of ``topic``, kept in a store.

        A ``None`` value deletes. The store is named ``name`` (default: the topic's name).

        ``versioned=history_ms`` keeps every version for that long, so a stream joined with
        it gets the version valid at each record's event time (``timestamp=`` of the table).
        ``map_values=fn`` keeps ``fn(value)`` instead of the whole value (Kafka Streams'
        ``KTable.mapValues``; a delete stays a delete): ``map_values=lambda p: p["zip"]``
        keeps only what a join needs, in a smaller store. ``bootstrap=True`` reads the topic
        to its end before any other input, at every start (Samza's bootstrap stream: a stream
        joined with it sees the table as of the start, then every later update).
        """
        where = _caller()
        if map_values is not None:
            _check_fn(map_values, "table", where)
        node = self._add(
            "table",
            (),
            where,
            name=name or topic,
            args={
                "topic": topic,
                "timestamp": _timestamp(timestamp, where),
                "versioned": versioned,
                "map_values": map_values,
                "bootstrap": bootstrap,
            },
            partitions=partitions,
            key_serde=serde_name(key, "key", where),
            value_serde=serde_name(value, "value", where),
        )
        return Table(self, node)

    def global_table(
        self,
        topic: str,
        *,
        key: SerdeLike = string,
        value: SerdeLike = json,
        name: str | None = None,
    ) -> GlobalTable:
        """A table of every partition of ``topic`` in every task: join a stream with it by any key.

        A side input, read to its end before processing starts; the join's ``on=`` gives the
        key.
        """
        where = _caller()
        node = self._add(
            "global_table",
            (),
            where,
            name=name or topic,
            args={"topic": topic},
            keyed=False,
            key_serde=serde_name(key, "key", where),
            value_serde=serde_name(value, "value", where),
        )
        return GlobalTable(self, node)

    def plan(self) -> Any:
        """The compiled plan (:class:`samzapy.pipeline.compiler.Plan`), built once."""
        if self._plan is None:
            from samzapy.pipeline.compiler import compile_app

            self._plan = compile_app(self)
        return self._plan


def _check_window_args(spec: Any, aggregation: Any, where: Where) -> None:
    """Refuse, at the user's line, a window or aggregation of the wrong kind.

    Swapped, or a function not called: ``samzapy.count`` for ``samzapy.count()``.
    """
    for what, value, kind, expected in (
        ("window", spec, WindowSpec, "samzapy.tumbling(...), hopping, session, sliding or count_window"),
        ("aggregation", aggregation, Aggregation, "samzapy.count(), sum, min, max, reduce or aggregate"),
    ):
        if value is None or isinstance(value, kind):
            continue
        if callable(value) and not isinstance(value, type):
            got = f"function {value.__name__}: call it, samzapy.{value.__name__}()"
        else:
            got = type(value).__name__
        msg = f"{where}: window()'s {what} must be {expected}, got {got}"
        raise PipelineError(msg)


class Stream:
    """A stream of keyed records in a pipeline.

    Every method adds a stage and returns the stream out of it (``to`` and ``sink`` return the
    stream they end, for more outputs).
    """

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
        """Each value replaced by ``fn(value)`` (or ``fn(key, value)`` with ``with_key``); the key stays."""
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
        self,
        fn: Callable[[Any], Any],
        *,
        name: str | None = None,
        key: SerdeLike = string,
        idle_timeout: int = 0,
    ) -> Stream:
        """Re-key each record by ``fn(value)``.

        The records move to the task of their new key through an intermediate topic
        (``<job>-<name>``) that the same job reads, so windows and joins after it see all of a
        key's records. ``name`` names the topic and the stage's store; give one to keep them
        when the pipeline changes.

        ``idle_timeout=ms``: a task that has read nothing for that long (processing time) says
        so downstream, so that windows close without it until its next record (the
        repartition task's ``window.idle.timeout.ms``).
        """
        where = _caller()
        _check_fn(fn, "key_by", where)
        if not isinstance(idle_timeout, int) or idle_timeout < 0:
            msg = f"{where}: key_by(idle_timeout=...) must be ms >= 0, got {idle_timeout!r}"
            raise PipelineError(msg)
        return self._then(
            "key_by",
            where,
            name=name,
            args={"fn": fn, "idle_timeout": idle_timeout},
            keyed=True,
            partitions=None,
            key_serde=serde_name(key, "key", where),
        )

    partition_by = key_by

    def merge(self, *others: Stream) -> Stream:
        """One stream of this stream's records and the others'.

        Between streams, records come in the order the task takes its inputs:
        ``task.input.order``, by record timestamp by default.

        The streams may come from topics with different partition counts; a stage that keeps
        state per key after the merge (``window``, ``join``, ``dedup``, ``process`` with
        stores) is then refused, naming the merge, unless a ``key_by`` comes between them:
        a key would be in different tasks.
        """
        where = _caller()
        streams = (self, *others)
        given: tuple[object, ...] = others  # user code is not type-checked: anything may come
        for s in given:
            if not isinstance(s, Stream):
                msg = f"{where}: merge() takes streams, got {type(s).__name__} {s!r}"
                raise PipelineError(msg)
        counts = {s.node.partitions for s in streams}
        return self._then(
            "merge",
            where,
            parents=tuple(s.node for s in streams),
            # keyed only if every side is: a window or join after it needs key_by otherwise
            keyed=all(s.node.keyed for s in streams),
            partitions=counts.pop() if len(counts) == 1 else None,
        )

    def branch(self, *predicates: Callable[[Any], bool]) -> tuple[Stream, ...]:
        """One stream per predicate.

        A record goes to the first branch whose predicate holds (to none when none does).
        """
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
        ``{"key": key, "start": ms, "end": ms, "value": result}`` (with ``"final"`` unless
        ``emit="final"`` without ``early``).
        """
        where = _caller()
        if not self.node.keyed:
            msg = (
                f"{where}: window() needs a keyed stream, and this stream has no keys "
                f"(app.stream(..., key=None) at {self._unkeyed_source().where}): call key_by(fn) before it"
            )
            raise PipelineError(msg)
        _check_copartitioned((self,), "window", where, require_keys=False)
        if emit not in ("final", "update"):
            msg = f"{where}: window(emit=...) must be 'final' or 'update', got {emit!r}"
            raise PipelineError(msg)
        _check_window_args(spec, aggregation, where)
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
        """Join with a table, a global table or another stream.

        With a table: the table's value for each record's key; a global table: the value for
        ``on(value)``; another stream: records of the same key at most ``within`` ms apart
        (``within=(before, after)`` for an asymmetric bound).

        ``joiner(left, right)`` makes the joined value (default: a pair ``[left, right]``);
        ``kind`` is ``inner`` or ``left`` (and ``outer`` for two streams).

        Two streams: ``grace`` is how far behind the newest time seen a record may be and still
        match; ``ids=(left_id, right_id)`` name each side's records (the result's id is the
        pair's; default: the record's input position); ``once=True`` decides each left record
        at most once ever (joined or, for a left join, unmatched: Photon's registry, kept for
        ``retention`` ms of event time), so a duplicate left record (the same key, time and id)
        is dropped. The stores' layout: ``pipeline.join.state.layout`` (docs/pipelines.md).
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
        """Drop records whose ``id_fn(value)`` was seen in the last ``within`` ms of event time.

        Per key: put ``key_by`` before it to dedup across keys.
        """
        where = _caller()
        _check_fn(id_fn, "dedup", where)
        _check_copartitioned((self,), "dedup", where, require_keys=False)
        return self._then("dedup", where, name=name, args={"fn": id_fn, "within": within})

    def process(self, fn: Callable[[Any, Any], Any], *, stores: Iterable[StoreSpec | str] = ()) -> Stream:
        """The escape hatch: ``fn(record, ctx)`` for each record.

        ``fn`` sees ``record.key``, ``record.value``, ``record.timestamp``, ``ctx.stores[name]``
        (the stores named here, kept and restored like any other) and ``ctx.emit(value,
        key=...)`` to send records on.
        """
        where = _caller()
        _check_fn(fn, "process", where)
        specs = tuple(s if isinstance(s, StoreSpec) else StoreSpec(s) for s in stores)
        if specs:
            _check_copartitioned((self,), "process", where, require_keys=False)
        return self._then("process", where, args={"fn": fn, "stores": specs})

    def to(self, topic: str, *, key: SerdeLike | None = None, value: SerdeLike | None = None) -> Stream:
        """Send every record to ``topic`` (created when missing), with the stream's serdes unless given."""
        where = _caller()
        value_serde = serde_name(value, "value", where) or self.node.value_serde
        _check_value_serde(self.node, value_serde, topic, where)
        return self._then(
            "to",
            where,
            args={
                "topic": topic,
                "key_serde": serde_name(key, "key", where) or self.node.key_serde,
                "value_serde": value_serde,
            },
        )

    def sink(self, fn: Callable[[Any, Any], Any]) -> Stream:
        """Call ``fn(key, value)`` for every record (e.g. to write to a database).

        Called again for records re-processed after a crash: make it idempotent.
        """
        where = _caller()
        _check_fn(fn, "sink", where)
        return self._then("sink", where, args={"fn": fn})

    def _unkeyed_source(self) -> Node:
        """The source without keys this stream reads (through merges), else its first source."""
        roots = source_roots(self.node)
        return next((r for r in roots if not r.keyed), roots[0] if roots else self._source())

    def _source(self) -> Node:
        node = self.node
        while node.parents:
            node = node.parents[0]
        return node

"""The executors of a pipeline's stages inside one task (:class:`samzapy.pipeline.task.PipelineTask`).

Records are pushed from a *root* (the stage reading a topic: a source, a table, the receiving
half of a ``key_by``) down the stages, as ``push(key, value, time, id)``; ``id`` is ``None``
unless the record already has a deterministic output id (a window result, a join result), in
which case the output sent carries it. Stateful stages delegate to :mod:`samzapy.operators`
and keep all their state in their stores.

Event time (the conventions of :mod:`samzapy.operators.event_time`): a *clock* stage (window,
stream-stream join, the sending half of ``key_by``) is told by each root above it about every
record (:meth:`Clock.before`) before the record goes down, and about control records; a
``key_by`` forwards event time across its intermediate topic with lineage headers and
watermark control records, exactly as :mod:`samzapy.jobs.pageview_repartition` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samzapy.operators import (
    CountAggregation,
    CountWindows,
    Deduplicator,
    HoppingWindows,
    JoinRegistry,
    RepartitionError,
    SessionWindows,
    SlidingAggregation,
    SlidingWindows,
    StreamStreamJoin,
    StreamTableJoin,
    TableTableJoin,
    TumblingWindows,
    Watermark,
    WindowedAggregation,
)
from samzapy.operators.event_time import (
    END_OF_STREAM,
    IDLE,
    WATERMARK,
    EventTime,
    Lineage,
    SequenceDedup,
    StoredCounter,
    control_message,
    late_bound,
    lineage_header,
)
from samzapy.operators.key_encoding import MIN_MS
from samzapy.operators.temporal_join import EventTimeStreamTableJoin
from samzapy.pipeline.api import Node, function_where
from samzapy.pipeline.specs import Counted, Hopping, Session, Sliding, Tumbling
from samzapy.serdes import StringSerde
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask

#: Header carrying a record's event time across an intermediate topic.
TIME_HEADER = "samzapy.time"
#: The window operators' namespace and the late counter key (as the page-view counter's).
WINDOW_NAMESPACE = b"cw"
LATE_KEY = b"\x00late"
#: The join registry's namespace in a stream-stream join's ``-time`` store (as the ad-click
#: join task's in its ``join-state``).
REGISTRY_NAMESPACE = b"reg"
EMIT_BATCH = 10_000


def call_user(stage: Stage, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an exception keeps its type and gets a note naming the stage and where
    the function is defined (the error policy's ``task.ignored.exceptions`` still matches)."""
    try:
        return fn(*args)
    except Exception as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        exc.add_note(
            f"in the pipeline's {stage.node.kind}() at {stage.node.where}: function {name} "
            f"(defined at {function_where(fn)}) raised"
        )
        raise


class Stage:
    """A stage: receives records and pushes its results to its children."""

    def __init__(self, task: PipelineTask, node: Node) -> None:
        self.task = task
        self.node = node
        self.children: list[Stage] = []

    def emit(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push a result to every child."""
        for child in self.children:
            child.push(key, value, ts, rid)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Take one record."""
        self.emit(key, value, ts, rid)

    def tick(self) -> None:
        """Periodic work (``window()``, every ``task.window.ms``)."""


class Clock(Stage):
    """A stage that follows event time (see the module)."""

    def before(self, root: Any, source: str, ts: int, lineage: Lineage | None) -> None:
        """A record from ``source`` at ``ts`` arrived at ``root``, before it goes down."""

    def control(self, root: Any, kind: bytes, source: str, watermark: int) -> None:
        """A control record reached ``root``."""

    def after(self, root: Any, source: str, ts: int, lineage: Lineage | None) -> None:
        """The record from ``source`` went down (all its stages ran)."""

    def sources(self, roots: list[Any]) -> list[str]:
        """The event-time sources of this clock, given the roots that feed it."""
        self._many = len(roots) > 1
        self._names: dict[tuple[int, str], str] = {}
        return [root.qualify(s, self._many) for root in roots for s in root.source_names()]

    def source(self, root: Any, raw: str) -> str:
        """The name of ``raw`` (a lineage source or a topic) as this clock knows it (cached:
        once per record on the hot path)."""
        key = (id(root), raw)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = root.qualify(raw, self._many)
        return name


class MapStage(Stage):
    """``map(fn)``."""

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push ``fn(value)`` (``fn(key, value)`` with ``with_key``)."""
        args = self.node.args
        out = (
            call_user(self, args["fn"], key, value)
            if args["with_key"]
            else call_user(self, args["fn"], value)
        )
        self.emit(key, out, ts, rid)


class FilterStage(Stage):
    """``filter(fn)``."""

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push the record when ``fn(value)`` holds."""
        if call_user(self, self.node.args["fn"], value):
            self.emit(key, value, ts, rid)


class FlatMapStage(Stage):
    """``flat_map(fn)``."""

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push every value of ``fn(value)`` (ids suffixed ``:i`` when the record had one)."""
        for i, out in enumerate(call_user(self, self.node.args["fn"], value)):
            self.emit(key, out, ts, None if rid is None else f"{rid}:{i}")


class BranchStage(Stage):
    """``branch(*predicates)``: each record to the first branch whose predicate holds."""

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Route the record."""
        for predicate, out in zip(self.node.args["predicates"], self.children, strict=True):
            if call_user(self, predicate, value):
                out.push(key, value, ts, rid)
                return


class ToStage(Stage):
    """``to(topic)``."""

    def __init__(self, task: PipelineTask, node: Node) -> None:
        super().__init__(task, node)
        self.stream = SystemStream("kafka", node.args["topic"])

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Send the record; then to the children (a ``to`` may go on)."""
        self.task.collector.send(OutgoingMessageEnvelope(self.stream, key=key, message=value, id=rid))
        self.emit(key, value, ts, rid)


class SinkStage(Stage):
    """``sink(fn)``."""

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Call ``fn(key, value)``."""
        call_user(self, self.node.args["fn"], key, value)
        self.emit(key, value, ts, rid)


class DedupStage(Stage):
    """``dedup(id_fn, within=...)`` over a :class:`~samzapy.operators.Deduplicator`."""

    def __init__(self, task: PipelineTask, node: Node, store: Any) -> None:
        super().__init__(task, node)
        self.dedup = Deduplicator(store, node.args["within"], metrics=task.metrics)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push the record unless its id was seen within the retention."""
        if not self.dedup.seen_before(str(call_user(self, self.node.args["fn"], value)), ts):
            self.emit(key, value, ts, rid)


class Record:
    """What a :meth:`~samzapy.pipeline.api.Stream.process` function gets."""

    __slots__ = ("key", "value", "timestamp")

    def __init__(self, key: Any, value: Any, timestamp: int) -> None:
        self.key, self.value, self.timestamp = key, value, timestamp


class ProcessContext:
    """The stores of a ``process`` stage and ``emit`` to send records on."""

    def __init__(self, stage: ProcessStage, stores: dict[str, Any]) -> None:
        self._stage = stage
        self.stores = stores
        self._ts = 0

    def emit(self, value: Any, *, key: Any = None) -> None:
        """Send ``value`` on (with the current record's key unless ``key`` is given)."""
        record = self._stage.current
        self._stage.emit(record.key if key is None else key, value, record.timestamp, None)


class ProcessStage(Stage):
    """``process(fn, stores=[...])``."""

    def __init__(self, task: PipelineTask, node: Node, stores: dict[str, Any]) -> None:
        super().__init__(task, node)
        self.ctx = ProcessContext(self, stores)
        self.current = Record(None, None, 0)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Call ``fn(record, ctx)``."""
        self.current = Record(key, value, ts)
        call_user(self, self.node.args["fn"], self.current, self.ctx)


class LookupStage(Stage):
    """A join with a global table (``on(value)`` or the key looks it up)."""

    def __init__(self, task: PipelineTask, node: Node, store: Any) -> None:
        super().__init__(task, node)
        self.store = store

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push ``joiner(value, table value)`` (inner: only when there is one)."""
        args = self.node.args
        on = args["on"]
        lookup = key if on.__name__ == "_key_of_record" else call_user(self, on, value)
        found = self.store.get(lookup)
        if found is None and args["kind"] == "inner":
            return
        self.emit(key, call_user(self, args["joiner"], value, found), ts, rid)


class StreamTableStage(Stage):
    """A stream joined with a table by processing time (the table's current value)."""

    def __init__(self, task: PipelineTask, node: Node, table_store: Any) -> None:
        super().__init__(task, node)
        self.join = StreamTableJoin(table_store, self._joiner, node.args["kind"])

    def _joiner(self, left: Any, right: Any) -> Any:
        return call_user(self, self.node.args["joiner"], left, right)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push the joined record (inner: only when the table has the key)."""
        joined = self.join.join(key, value)
        if joined is not None:
            self.emit(key, joined, ts, rid)

    def table_update(self, key: Any, value: Any, ts: int) -> None:
        """The table changed (the table root wrote the store)."""


class TemporalJoinStage(Stage):
    """A stream joined with a versioned table by event time: each record with the table's
    version valid at its time, released once the table has passed it
    (:class:`~samzapy.operators.temporal_join.EventTimeStreamTableJoin`)."""

    def __init__(self, task: PipelineTask, node: Node, table: Any, buffer: Any, key_serde: Any) -> None:
        super().__init__(task, node)
        self.serde = key_serde
        self.join = EventTimeStreamTableJoin(
            table, buffer, self._joiner, kind=node.args["kind"], grace_ms=node.args["grace"]
        )

    def _joiner(self, left: Any, right: Any) -> Any:
        return call_user(self, self.node.args["joiner"], left, right)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Buffer (or join) the record; push what the join released."""
        ref = (rid or self.task.position_id()).encode()
        self._released(self.join.join(self.serde.to_bytes(key), value, ts, ref))

    def table_update(self, key: Any, value: Any, ts: int) -> None:
        """A new table version; push the stream records it released."""
        self._released(self.join.update_table(self.serde.to_bytes(key), value, ts))

    def _released(self, results: list[Any]) -> None:
        for result in results:
            if result.value is not None:
                key = self.serde.from_bytes(result.key)
                self.emit(key, result.value, result.time_ms, f"tj:{result.ref.decode()}")


class TableTableStage(Stage):
    """Two tables joined: a change of either side pushes the joined value (``None``: the
    joined key was deleted) (:class:`~samzapy.operators.TableTableJoin`, which writes the
    tables' stores)."""

    def __init__(self, task: PipelineTask, node: Node, left: Any, right: Any) -> None:
        super().__init__(task, node)
        self.join = TableTableJoin(left, right, self._joiner, node.args["kind"])

    def _joiner(self, left: Any, right: Any) -> Any:
        return call_user(self, self.node.args["joiner"], left, right)

    def update(self, side: str, key: Any, value: Any, ts: int) -> None:
        """A change of one side."""
        change = self.join.update_left(key, value) if side == "left" else self.join.update_right(key, value)
        if change is not None:
            self.emit(change.key, change.value, ts, None)


class WindowStage(Clock):
    """``window(...)``: the page-view counter's logic (:mod:`samzapy.jobs.pageview_counter`)
    for any key, window kind and aggregation, over one store (windows ``cw``, event time
    ``et``, the late count)."""

    def __init__(self, task: PipelineTask, node: Node, store: Any, key_serde: Any) -> None:
        super().__init__(task, node)
        self.store = store
        self.serde = key_serde
        args = node.args
        self.assigner = _assigner(args["spec"])
        self.grace = args["grace"]
        self.emit_mode = args["emit"]
        self.early = args["early"]
        self.plain = self.emit_mode == "final" and self.early == 0
        self.aggregator = args["aggregation"].aggregator()
        late = args["late_to"]
        self.late_stream = SystemStream("kafka", late) if late else None
        self.late_total = StoredCounter(store, LATE_KEY)
        self.late_metric = task.metrics.counter("late-messages")
        self.bound = MIN_MS
        self._hopping = isinstance(self.assigner, HoppingWindows)
        self._str_keys = isinstance(key_serde, StringSerde)

    def start(self, sources: list[str]) -> None:
        """Build the operators, once the sources are known."""
        self.time = EventTime(self.store, sources, self.grace)
        if isinstance(self.assigner, CountWindows):
            self.windows: Any = CountAggregation(
                self.store,
                self.assigner,
                self.aggregator,
                emit=self.emit_mode,
                early_fire_ms=self.early,
                namespace=WINDOW_NAMESPACE,
            )
            return
        options = {
            "emit": self.emit_mode,
            "early_fire_ms": self.early,
            "watermark_lateness_ms": self.grace,
            "namespace": WINDOW_NAMESPACE,
            "metrics": self.task.metrics,
        }
        op = SlidingAggregation if isinstance(self.assigner, SlidingWindows) else WindowedAggregation
        self.windows = op(self.store, self.assigner, self.aggregator, self.time.watermark, **options)

    def before(self, root: Any, source: str, ts: int, lineage: Lineage | None) -> None:
        """Lateness bound of the record, then its source's progress (as the counter does)."""
        name = self._names.get((id(root), source)) or self.source(root, source)
        if lineage is None:
            self.bound = self.time.watermark.current
            self.time.advance(name, ts)
        else:
            self.bound = late_bound(lineage.progress, self.grace)
            self.time.advance(name, max(lineage.progress, ts))

    def control(self, root: Any, kind: bytes, source: str, watermark: int) -> None:
        """Move the source's progress; emit the windows it closed."""
        name = self.source(root, source)
        if kind == END_OF_STREAM:
            advanced = self.time.end(name)
        elif kind == IDLE:
            advanced = self.time.idle(name)
        else:
            advanced = self.time.advance(name, watermark)
        if advanced:
            self._emit_closed()

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Add the record to its windows (or count it late)."""
        if self._closed(ts, self.bound):
            self._late(key, value)
            return
        # A str key under the string serde: its UTF-8 bytes without the serde's call (hot path).
        kb = key.encode() if self._str_keys and type(key) is str else self.serde.to_bytes(key)
        if self._hopping:
            added = self.windows.add(kb, ts, value, closed_before=self.bound)
        else:
            added = self.windows.add(kb, ts, value)
        if added.late:
            self._late(key, value)
        elif added.updates:
            self._send(added.updates)

    def _closed(self, t: int, bound: int) -> bool:
        a = self.assigner
        if isinstance(a, TumblingWindows):
            return t - (t - a.offset_ms) % a.size_ms + a.size_ms <= bound
        if isinstance(a, SessionWindows):
            return t + a.gap_ms <= bound
        if isinstance(a, SlidingWindows):
            return t + a.difference_ms + 1 <= bound
        if isinstance(a, HoppingWindows):
            return a.assign(t)[-1][1] <= bound
        return False

    def _late(self, key: Any, value: Any) -> None:
        self.late_metric.inc()
        self.late_total.inc()
        if self.late_stream is not None:
            env = self.task.envelope
            late_id = f"late:{self.task.task_name}:{env.stream}:{env.offset}"
            self.task.collector.send(
                OutgoingMessageEnvelope(self.late_stream, key=key, message=value, id=late_id)
            )

    def tick(self) -> None:
        """Emit closed windows, and early results when due."""
        self._emit_closed()
        if self.early:
            self._send(self.windows.fire_early(int(time.time() * 1000)))

    def _emit_closed(self) -> None:
        if isinstance(self.windows, CountAggregation):
            return
        while results := self.windows.close_due(limit=EMIT_BATCH):
            self._send(results)

    def _send(self, results: list[Any]) -> None:
        for r in results:
            value: dict[str, Any] = {"key": None, "start": r.start, "end": r.end, "value": r.value}
            key = self.serde.from_bytes(r.key)
            value["key"] = key
            if not self.plain:
                value["final"] = r.final
                value["late"] = r.late
                value["window_id"] = r.window or r.id
            self.emit(key, value, r.end - 1, r.id)


def _assigner(spec: Any) -> Any:
    if isinstance(spec, Tumbling):
        return TumblingWindows(spec.size_ms)
    if isinstance(spec, Hopping):
        return HoppingWindows(spec.size_ms, spec.every_ms)
    if isinstance(spec, Session):
        return SessionWindows(spec.gap_ms)
    if isinstance(spec, Sliding):
        return SlidingWindows(spec.difference_ms)
    if isinstance(spec, Counted):
        return CountWindows(spec.size, spec.step)
    msg = f"not a window: {spec!r} (samzapy.tumbling, hopping, session, sliding, count_window)"
    raise TypeError(msg)


class StreamJoinStage(Clock):
    """Two streams joined within a time bound (:class:`~samzapy.operators.StreamStreamJoin`), as
    :mod:`samzapy.jobs.ad_click_join` joins clicks to impressions: the event time (minimum
    progress of the inputs minus ``grace``) is in the ``-time`` store and moves after each
    record; with ``once``, a :class:`~samzapy.operators.JoinRegistry` in the same store decides
    each left record at most once."""

    def __init__(self, task: PipelineTask, node: Node, stores: list[Any], key_serde: Any) -> None:
        super().__init__(task, node)
        self.left_store, self.right_store, self.expiry, self.time_store = stores
        self.serde = key_serde
        self.sides = [JoinSide(self, "left"), JoinSide(self, "right")]
        args = node.args
        self.ids = args["ids"]
        self.registry = (
            JoinRegistry(
                self.time_store, args["retention"], namespace=REGISTRY_NAMESPACE, metrics=task.metrics
            )
            if args["once"]
            else None
        )

    def start(self, sources: list[str]) -> None:
        """Build the operator, once the sources are known."""
        args = self.node.args
        self.time = EventTime(self.time_store, sources, args["grace"])
        self.join = StreamStreamJoin(
            self.left_store,
            self.right_store,
            self.expiry,
            self.time.watermark,
            self._joiner,
            window_before_ms=args["before"],
            window_after_ms=args["after"],
            kind=args["kind"],
            metrics=self.task.metrics,
        )

    def _joiner(self, left: Any, right: Any) -> Any:
        return call_user(self, self.node.args["joiner"], left, right)

    def after(self, root: Any, source: str, ts: int, lineage: Lineage | None) -> None:
        """Advance the source's progress (after the record was matched, as the task does)."""
        self.time.advance(self.source(root, source), ts if lineage is None else max(lineage.progress, ts))

    def control(self, root: Any, kind: bytes, source: str, watermark: int) -> None:
        """Move the source's progress; expire what closed."""
        name = self.source(root, source)
        advanced = self.time.end(name) if kind == END_OF_STREAM else self.time.advance(name, watermark)
        if advanced:
            self._results(self.join.expire())

    def add(self, side: str, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """A record of one side; push its matches."""
        kb = self.serde.to_bytes(key)
        if self.ids is not None:
            fn = self.ids[0 if side == "left" else 1]
            record_id = str(call_user(self, fn, value))
        else:
            record_id = rid or self.task.position_id()
        add = self.join.add_left if side == "left" else self.join.add_right
        self._results(add(kb, ts, value, record_id))

    def tick(self) -> None:
        """Expire closed records (unmatched ones of left/outer joins are pushed); collect the
        registry's old entries."""
        self._results(self.join.expire())
        if self.registry is not None:
            self.registry.gc()

    def _results(self, results: list[Any]) -> None:
        for r in results:
            if self.registry is not None and r.left is not None:
                left_id = str(call_user(self, self.ids[0], r.left)) if self.ids else r.id
                if not self.registry.try_register(left_id, r.left_time):
                    self.task.duplicates.inc()
                    continue
            ts = max(t for t in (r.left_time, r.right_time) if t is not None)
            self.emit(self.serde.from_bytes(r.key), r.value, ts, r.id)


class JoinSide(Stage):
    """One side of a stream-stream join: what the side's stream pushes into."""

    def __init__(self, join: StreamJoinStage, side: str) -> None:
        super().__init__(join.task, join.node)
        self.join, self.side = join, side

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Add the record to its side."""
        self.join.add(self.side, key, value, ts, rid)


class KeyBySend(Clock):
    """The sending half of ``key_by``: re-keys each record into the intermediate topic with
    its lineage and event time, and broadcasts its progress to every partition (as
    :class:`samzapy.jobs.pageview_repartition.EventTimeRepartitionTask`)."""

    def __init__(self, task: PipelineTask, node: Node, store: Any, topic: str, partitions: int) -> None:
        super().__init__(task, node)
        self.output = SystemStream("kafka", topic)
        self.partitions = partitions
        self.progress = Watermark(store, namespace=b"rp")
        self.announced = MIN_MS
        self.before_progress = MIN_MS

    def before(self, root: Any, source: str, ts: int, lineage: Lineage | None) -> None:
        """Every record read moves the progress (filtered ones too); the records sent carry
        the progress before it."""
        self.before_progress = self.progress.current
        self.progress.advance_to(ts)

    def sources(self, roots: list[Any]) -> list[str]:
        """Not an EventTime: one progress for the task."""
        return []

    def control(self, root: Any, kind: bytes, source: str, watermark: int) -> None:
        """Forward a watermark or end-of-stream."""
        if self.progress.advance_to(watermark) or kind == END_OF_STREAM:
            self._announce(END_OF_STREAM if kind == END_OF_STREAM else WATERMARK)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Send the record re-keyed, with lineage and time headers."""
        new_key = call_user(self, self.node.args["fn"], value)
        if new_key is None:
            env = self.task.envelope
            msg = (
                f"key_by() at {self.node.where}: the key function (defined at "
                f"{function_where(self.node.args['fn'])}) returned None for the record at "
                f"{env.system_stream_partition} offset {env.offset}; return a key for every "
                "record, or filter such records out before"
            )
            raise RepartitionError(msg)
        headers = [
            lineage_header(self.task.source_name, self.task.sequence(), self.before_progress),
            (TIME_HEADER, str(ts).encode()),
        ]
        self.task.collector.send(
            OutgoingMessageEnvelope(self.output, key=new_key, message=value, headers=headers, id=rid)
        )

    def tick(self) -> None:
        """Broadcast the progress when it moved."""
        if self.progress.current > self.announced:
            self._announce(WATERMARK)

    def _announce(self, kind: bytes) -> None:
        progress = self.progress.current
        headers, body = control_message(kind, self.task.source_name, progress)
        for partition in range(self.partitions):
            self.task.collector.send(
                OutgoingMessageEnvelope(
                    self.output,
                    message=body,
                    partition=partition,
                    headers=headers,
                    id=f"{kind.decode()}:{self.output.stream}:{self.task.source_name}:{progress}:{partition}",
                )
            )
        self.announced = progress


class Root:
    """A stage reading a topic: hands each record to the clocks below, then down."""

    def __init__(self, task: PipelineTask, node: Node, topic: str) -> None:
        self.task = task
        self.node = node
        self.topic = topic
        self.children: list[Stage] = []
        self.clocks: list[Clock] = []
        #: The clocks that act after a record went down (a stream-stream join).
        self.after_clocks: list[Clock] = []
        self.ts_fn = node.args.get("timestamp")
        #: The field holding the event time, when ``timestamp=`` named one (no call per record).
        self.ts_field: str | None = getattr(self.ts_fn, "field", None)

    def source_names(self) -> list[str]:
        """The event-time sources this root stands for."""
        return [self.topic]

    def qualify(self, raw: str, many: bool) -> str:
        """A source's name in a clock fed by one root (``many`` False) or several."""
        return self.topic

    def receive(self, envelope: Any) -> None:
        """A data record of the topic."""
        value = envelope.message
        if self.ts_field is not None and type(value) is dict and self.ts_field in value:
            ts = value[self.ts_field]
        else:
            ts = envelope.timestamp if self.ts_fn is None else self._time(value)
        for clock in self.clocks:
            clock.before(self, self.topic, ts, None)
        for child in self.children:
            child.push(envelope.key, value, ts, None)
        if self.after_clocks:
            for clock in self.after_clocks:
                clock.after(self, self.topic, ts, None)

    def _time(self, value: Any) -> int:
        return call_user(self, self.ts_fn, value)  # type: ignore[arg-type]

    def control(self, envelope: Any, kind: bytes, source: str | None, watermark: int) -> None:
        """A control record of the topic (its source is the topic)."""
        for clock in self.clocks:
            clock.control(self, kind, self.topic, watermark)


class TableRoot(Root):
    """An ``app.table``: writes the table store (unless a table-table join does), tells the
    joins reading it."""

    def __init__(self, task: PipelineTask, node: Node, topic: str, store: Any, versioned: Any) -> None:
        super().__init__(task, node, topic)
        self.store = store
        self.versioned = versioned
        self.writers: list[tuple[TableTableStage, str]] = []
        self.readers: list[Any] = []

    def receive(self, envelope: Any) -> None:
        """A table update (``None`` deletes)."""
        key, value = envelope.key, envelope.message
        ts = envelope.timestamp if self.ts_fn is None else (MIN_MS if value is None else self._time(value))
        if self.writers:
            for join, side in self.writers:
                join.update(side, key, value, ts)
        elif self.versioned is None:
            self.store.put(key, value)
        for reader in self.readers:
            reader.table_update(key, value, ts)
        for child in self.children:
            child.push(key, value, ts, None)


class KeyByReceive(Root):
    """The receiving half of ``key_by``: drops re-sent records by lineage sequence, then
    hands each record on with its lineage."""

    def __init__(self, task: PipelineTask, node: Node, topic: str, store: Any, upstream: int) -> None:
        super().__init__(task, node, topic)
        self.dedup = SequenceDedup(store)
        self.upstream = upstream

    def source_names(self) -> list[str]:
        """One source per upstream task."""
        return [str(i) for i in range(self.upstream)]

    def qualify(self, raw: str, many: bool) -> str:
        """The upstream task's number, after the topic when the clock has several roots."""
        return f"{self.topic}/{raw}" if many else raw

    def receive(self, envelope: Any) -> None:
        """A re-keyed record."""
        from samzapy.operators.event_time import lineage_of

        lineage = lineage_of(envelope)
        ts = envelope.timestamp
        for name, raw in envelope.headers:
            if name == TIME_HEADER:
                ts = int(raw)
        if lineage is not None:
            if self.dedup.is_duplicate(lineage.source, lineage.sequence):
                self.task.duplicates.inc()
                return
            source = lineage.source
        else:
            source = "0"
        for clock in self.clocks:
            clock.before(self, source, ts, lineage)
        for child in self.children:
            child.push(envelope.key, envelope.message, ts, None)
        for clock in self.after_clocks:
            clock.after(self, source, ts, lineage)

    def control(self, envelope: Any, kind: bytes, source: str | None, watermark: int) -> None:
        """Progress of an upstream task."""
        for clock in self.clocks:
            clock.control(self, kind, source if source is not None else "0", watermark)

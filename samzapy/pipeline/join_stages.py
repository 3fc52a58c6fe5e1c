"""The join stages of a pipeline: a stream with a table (by processing time, or by event time
with a versioned table), with a global table, two tables, and two streams within a time bound;
each delegates to its operator in :mod:`samzapy.operators`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samzapy.operators import (
    ForeignKeyLeft,
    ForeignKeyRight,
    JoinRegistry,
    Response,
    StreamStreamJoin,
    StreamTableJoin,
    Subscription,
    TableTableJoin,
)
from samzapy.operators.event_time import (
    END_OF_STREAM,
    EventTime,
    Lineage,
)
from samzapy.operators.temporal_join import EventTimeStreamTableJoin
from samzapy.pipeline.api import Node
from samzapy.pipeline.graph import _key_of_record
from samzapy.pipeline.stages import Clock, Stage, call_user
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask

#: The join registry's namespace in a stream-stream join's ``-time`` store (as the ad-click
#: join task's in its ``join-state``).
REGISTRY_NAMESPACE = b"reg"


class LookupStage(Stage):
    """A join with a global table (``on(value)`` or the key looks it up)."""

    def __init__(self, task: PipelineTask, node: Node, store: Any) -> None:
        super().__init__(task, node)
        self.store = store

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push ``joiner(value, table value)`` (inner: only when there is one)."""
        args = self.node.args
        on = args["on"]
        lookup = key if on is _key_of_record else call_user(self, on, value)
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

    def table_ended(self) -> None:
        """The table's partition ended: nothing waits for it in processing time."""


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

    def table_ended(self) -> None:
        """The table's partition ended: push every record still waiting for it."""
        self._released(self.join.end_table())

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


class ForeignKeyStage(Stage):
    """Two tables joined through a foreign key (:mod:`samzapy.operators.fk_join`, as
    :mod:`samzapy.jobs.order_customer_join` runs it): the left half keeps the left table and
    sends subscriptions to the right key's task, the right half keeps the right table and the
    subscriptions and answers them; both halves run in every task, talking through the
    subscription and response topics. Versions are input offsets, as in the task."""

    def __init__(
        self,
        task: PipelineTask,
        node: Node,
        stores: list[Any],
        topics: tuple[str, str],
        key_serde: Any,
        fk_serde: Any,
    ) -> None:
        super().__init__(task, node)
        left_store, right_store, subscription_store = stores
        self.left = ForeignKeyLeft(
            left_store,
            self._foreign_key,
            lambda left, right: (left, right),
            node.args["kind"],
            metrics=task.metrics,
        )
        self.right = ForeignKeyRight(right_store, subscription_store, key_serde, fk_serde)
        self.subscriptions = SystemStream("kafka", topics[0])
        self.responses = SystemStream("kafka", topics[1])

    def _foreign_key(self, value: Any) -> Any:
        return call_user(self, self.node.args["foreign_key"], value)

    def update(self, side: str, key: Any, value: Any, ts: int) -> None:
        """A change of one table (from its root)."""
        version = self.task.envelope.offset
        if side == "left":
            update = self.left.update(key, value, version)
            for subscription in update.subscriptions:
                self.task.collector.send(
                    OutgoingMessageEnvelope(
                        self.subscriptions, key=subscription.foreign_key, message=subscription.to_message()
                    )
                )
            self._emit(update.change, ts)
        else:
            self._respond(self.right.update(key, value, version))

    def subscribed(self, envelope: Any) -> None:
        """A subscription reached the right key's task: answer it."""
        response = self.right.subscribe(Subscription.from_message(envelope.key, envelope.message))
        self._respond([] if response is None else [response])

    def resolved(self, envelope: Any) -> None:
        """A response reached the left key's task: the joined value, if still current."""
        self._emit(
            self.left.resolve(Response.from_message(envelope.key, envelope.message)), envelope.timestamp
        )

    def _respond(self, responses: list[Any]) -> None:
        env = self.task.envelope
        origin = f"{env.stream}:{env.partition}:{env.offset}"
        for response in responses:
            self.task.collector.send(
                OutgoingMessageEnvelope(
                    self.responses,
                    key=response.key,
                    message=response.to_message(),
                    id=self.right.response_id(origin, response),
                )
            )

    def _emit(self, change: Any, ts: int) -> None:
        if change is None:
            return
        value = None if change.value is None else call_user(self, self.node.args["joiner"], *change.value)
        self.emit(change.key, value, ts, None)

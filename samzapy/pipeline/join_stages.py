"""The join stages of a pipeline.

A stream with a table (by processing time, or by event time with a versioned table), with a
global table, two tables, and two streams within a time bound (that one in
:mod:`samzapy.pipeline.stream_join_stage`, re-exported here); each delegates to its operator in
:mod:`samzapy.operators`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samzapy.operators import (
    ForeignKeyLeft,
    ForeignKeyRight,
    Response,
    StreamTableJoin,
    Subscription,
    TableTableJoin,
)
from samzapy.operators.fk_join import state_layouts as fk_layouts
from samzapy.operators.temporal_join import EventTimeStreamTableJoin
from samzapy.operators.temporal_layout import TemporalBufferLayout
from samzapy.output_ids import id_from_headers
from samzapy.pipeline.api import Node
from samzapy.pipeline.graph import _key_of_record
from samzapy.pipeline.stages import Stage, call_user
from samzapy.pipeline.stream_join_stage import REGISTRY_NAMESPACE as REGISTRY_NAMESPACE
from samzapy.pipeline.stream_join_stage import JoinSide as JoinSide
from samzapy.pipeline.stream_join_stage import StreamJoinStage as StreamJoinStage
from samzapy.pipeline.stream_join_stage import layout_of, stream_join_layouts
from samzapy.serdes import BUILTIN_SERDES
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask

#: Why a reshard refuses a pipeline with a foreign-key join (as the task version's
#: :data:`samzapy.jobs.order_customer_join.RESHARD_REFUSAL`).
FK_RESHARD_REFUSAL = (
    "the pipeline's foreign-key join keeps its left input's offsets as versions: under a new "
    "partition count a left key's next update arrives at an offset of another partition, which "
    "can be below its stored version. Start the pipeline afresh on the new partition count "
    "(a new app name: new changelogs and checkpoints)"
)


def join_state_layouts(plan: Any, config: Any = None) -> dict[str, Any]:
    """How the join stages' stores read as data (:mod:`samzapy.operators.state_layout`).

    The layouts of the operators the task versions declare: a foreign-key join's subscriptions
    (:func:`samzapy.operators.fk_join.state_layouts`), an event-time stream-table join's
    waiting records (:class:`~samzapy.operators.temporal_layout.TemporalBufferLayout`) and a
    stream-stream join's four stores in the layout ``config`` chooses
    (:func:`samzapy.pipeline.stream_join_stage.stream_join_layouts`; no config: layout 2); the
    tables and joined stores are key-value, versioned tables found by their config.
    """
    layouts: dict[str, Any] = {}
    for node_id, names in plan.stores_of.items():
        if plan.app.nodes[node_id].kind == "stream_stream_join":
            layouts.update(stream_join_layouts(names, layout_of(config)))
    for store in plan.stores.values():
        if store.role == "fk-subscriptions":
            left, right = plan.app.nodes[store.node].parents
            layouts.update(
                fk_layouts(
                    store.name,
                    key_serde=_builtin_serde(left.key_serde),
                    foreign_key_serde=_builtin_serde(right.key_serde),
                    reshard_refusal=FK_RESHARD_REFUSAL,
                )
            )
        elif store.role == "join-buffer":
            layouts[store.name] = TemporalBufferLayout()
    return layouts


def _builtin_serde(name: str | None) -> Any:
    factory = BUILTIN_SERDES.get(name or "string")
    return None if factory is None else factory()


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


class InputIds:
    """The output ids of a stream-table join stage.

    ``<stage name>:<origin>``, as :mod:`samzapy.jobs.pageview_enrich` names its records
    ``enrich:<origin>`` (a stage named ``enrich`` gives the task's ids).

    The origin is the record's id when it already has one (after a window or a join), else
    the input's own ``samzapy.id`` (an upstream job's, or the sending task's of a ``key_by``), else
    ``<task>:<stream>:<offset>``: a record re-sent upstream is joined under the same id. A
    second result of the same input (after a ``flat_map``) gets ``:<n>`` after its origin, so
    ids stay unique and the first result's id is the task's.
    """

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.prefix = stage.task._plan.names[stage.node.id]
        self._envelope: Any = None
        self._count = 0

    def origin(self, rid: str | None) -> str:
        """The origin of the record being pushed (see the class)."""
        env = self.stage.task.envelope
        if env is not self._envelope:
            self._envelope, self._count = env, 0
        else:
            self._count += 1
        if rid is None:
            rid = id_from_headers(env.headers) or f"{self.stage.task.task_name}:{env.stream}:{env.offset}"
        return rid if self._count == 0 else f"{rid}:{self._count}"

    def of(self, origin: str) -> str:
        """The output id of a result of ``origin``."""
        return f"{self.prefix}:{origin}"


class TableValues:
    """A table's store as its readers see it.

    The values, whether the table root keeps them as they are or a table-table join keeps them
    as ``{"offset", "value"}`` entries (decided when the stages are built, after the readers).
    """

    def __init__(self, root: Any) -> None:
        self.root = root

    def get(self, key: Any) -> Any:
        """The table's value of ``key`` (``None``: none)."""
        found = self.root.store.get(key)
        if found is None or not self.root.entries:
            return found
        return found["value"]


class StreamTableStage(Stage):
    """A stream joined with a table by processing time (the table's current value).

    As :mod:`samzapy.jobs.pageview_enrich` joins (:class:`~samzapy.operators.StreamTableJoin`);
    results are named by :class:`InputIds`.
    """

    def __init__(self, task: PipelineTask, node: Node, table: Any) -> None:
        super().__init__(task, node)
        self.join = StreamTableJoin(TableValues(table), self._joiner, node.args["kind"])  # type: ignore[arg-type]
        self.ids = InputIds(self)

    def _joiner(self, left: Any, right: Any) -> Any:
        return call_user(self, self.node.args["joiner"], left, right)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Push the joined record (inner: only when the table has the key)."""
        origin = self.ids.origin(rid)
        joined = self.join.join(key, value)
        if joined is not None:
            self.emit(key, joined, ts, self.ids.of(origin))

    def table_update(self, key: Any, value: Any, ts: int) -> None:
        """The table changed (the table root wrote the store)."""

    def table_ended(self) -> None:
        """The table's partition ended: nothing waits for it in processing time."""


class TemporalJoinStage(Stage):
    """A stream joined with a versioned table by event time.

    Each record with the table's version valid at its time, released once the table has passed
    it (:class:`~samzapy.operators.temporal_join.EventTimeStreamTableJoin`); results are named
    by :class:`InputIds`, whatever the time they are released.
    """

    def __init__(self, task: PipelineTask, node: Node, table: Any, buffer: Any, key_serde: Any) -> None:
        super().__init__(task, node)
        self.serde = key_serde
        self.join = EventTimeStreamTableJoin(
            table, buffer, self._joiner, kind=node.args["kind"], grace_ms=node.args["grace"]
        )
        self.ids = InputIds(self)

    def _joiner(self, left: Any, right: Any) -> Any:
        return call_user(self, self.node.args["joiner"], left, right)

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Buffer (or join) the record; push what the join released."""
        ref = self.ids.origin(rid).encode()
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
                self.emit(key, result.value, result.time_ms, self.ids.of(result.ref.decode()))


def _version(entry: dict[str, Any] | None) -> str:
    return "-" if entry is None else str(entry["offset"])


def join_values(stage: Stage, key: Any, left: Any, right: Any) -> Any:
    """The user's joiner of a table join on two values (``with_key``: on the key too)."""
    args = stage.node.args
    if args.get("with_key"):
        return call_user(stage, args["joiner"], key, left, right)
    return call_user(stage, args["joiner"], left, right)


class TableTableStage(Stage):
    """Two tables joined, as :mod:`samzapy.jobs.profile_settings_join` joins them.

    With :class:`~samzapy.operators.TableTableJoin`, which writes the tables' stores.

    Each side's store keeps ``{"offset", "value"}`` (the input offset of the version); every
    change of either side pushes the key's whole joined value (``None``: no joined record, also
    when it had none before) with the id ``<stage name>:<stream>:<partition>:<offset>:<left
    offset>:<right offset>``, and keeps it in the joined store: the same id always carries the
    same bytes, whichever versions met, and the last change per key is the joined table, also
    after a crashed run sent changes its rerun does not.
    """

    def __init__(self, task: PipelineTask, node: Node, left: Any, right: Any, joined: Any) -> None:
        super().__init__(task, node)
        self.left, self.right, self.joined = left, right, joined
        self.join = TableTableJoin(left, right, lambda lv, rv: (lv, rv), node.args["kind"])
        self.prefix = task._plan.names[node.id]

    def update(self, side: str, key: Any, value: Any, ts: int) -> None:
        """A change of one side (``None`` deletes)."""
        env = self.task.envelope
        entry = None if value is None else {"offset": env.offset, "value": value}
        update = self.join.update_left if side == "left" else self.join.update_right
        change = update(key, entry)
        joined = None
        if change is not None and change.value is not None:
            lv, rv = change.value
            joined = join_values(self, key, _value(lv), _value(rv))
        self.joined.put(key, joined)
        versions = f"{_version(self.left.get(key))}:{_version(self.right.get(key))}"
        self.emit(key, joined, ts, f"{self.prefix}:{env.stream}:{env.partition}:{env.offset}:{versions}")


def _value(entry: dict[str, Any] | None) -> Any:
    return None if entry is None else entry["value"]


class ForeignKeyStage(Stage):
    """Two tables joined through a foreign key (:mod:`samzapy.operators.fk_join`).

    As :mod:`samzapy.jobs.order_customer_join` runs it: the left half keeps the left table and
    sends subscriptions to the right key's task, the right half keeps the right table and the
    subscriptions and answers them; both halves run in every task, talking through the
    subscription and response topics. Versions are input offsets, as in the task; every joined
    change is also kept in the joined store (``<name>-joined``).

    Ids name the two topics by the stage: ``<name>-subscriptions`` and ``<name>-responses``
    (their topics carry the app's name too): a response is ``fkr:<origin>:...``
    (:meth:`~samzapy.operators.ForeignKeyRight.response_id`), a joined change resolved from one
    ``<task>:<name>-responses:<offset>:0``, what a left update sends the container's id; so a
    stage named as the task's topics' prefix (``order-customer``) gives the task's ids.
    """

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
        left_store, right_store, subscription_store, self.joined = stores
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
        name = task._plan.names[node.id]
        self.id_streams = {topics[0]: f"{name}-subscriptions", topics[1]: f"{name}-responses"}

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
            self._emit(update.change, ts, None)
        else:
            self._respond(self.right.update(key, value, version))

    def subscribed(self, envelope: Any) -> None:
        """A subscription reached the right key's task: answer it."""
        response = self.right.subscribe(Subscription.from_message(envelope.key, envelope.message))
        self._respond([] if response is None else [response])

    def resolved(self, envelope: Any) -> None:
        """A response reached the left key's task: the joined value, if still current."""
        change = self.left.resolve(Response.from_message(envelope.key, envelope.message))
        rid = f"{self.task.task_name}:{self.id_streams[envelope.stream]}:{envelope.offset}:0"
        self._emit(change, envelope.timestamp, rid)

    def _respond(self, responses: list[Any]) -> None:
        env = self.task.envelope
        origin = f"{self.id_streams.get(env.stream, env.stream)}:{env.partition}:{env.offset}"
        for response in responses:
            self.task.collector.send(
                OutgoingMessageEnvelope(
                    self.responses,
                    key=response.key,
                    message=response.to_message(),
                    id=self.right.response_id(origin, response),
                )
            )

    def _emit(self, change: Any, ts: int, rid: str | None) -> None:
        if change is None:
            return
        value = None if change.value is None else join_values(self, change.key, *change.value)
        self.joined.put(change.key, value)
        self.emit(change.key, value, ts, rid)

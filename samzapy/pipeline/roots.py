"""The roots of a pipeline's stages in a task and the sending half of a ``key_by``.

The roots are the stages that read a topic: a source, a table, the receiving half of a
``key_by``. They are where event time enters, as in :mod:`samzapy.jobs.pageview_repartition` and
:mod:`samzapy.jobs.pageview_counter`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samzapy.errors import SerdeError
from samzapy.operators import (
    RepartitionError,
    Watermark,
)
from samzapy.operators.event_time import (
    END_OF_STREAM,
    IDLE,
    WATERMARK,
    Lineage,
    SequenceDedup,
    control_message,
    lineage_header,
)
from samzapy.operators.key_encoding import MIN_MS
from samzapy.pipeline.api import Node, function_where
from samzapy.pipeline.stages import Clock, Stage, call_user
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask

#: Header carrying a record's event time across an intermediate topic.
TIME_HEADER = "samzapy.time"


class KeyBySend(Clock):
    """The sending half of ``key_by``.

    Re-keys each record into the intermediate topic with its lineage and event time, and
    broadcasts its progress to every partition (as
    :class:`samzapy.jobs.pageview_repartition.EventTimeRepartitionTask`).
    """

    def __init__(self, task: PipelineTask, node: Node, store: Any, topic: str, partitions: int) -> None:
        super().__init__(task, node)
        self.output = SystemStream("kafka", topic)
        self.partitions = partitions
        self.progress = Watermark(store, namespace=b"rp")
        self.announced = MIN_MS
        self.before_progress = MIN_MS
        self.idle_after_s = node.args.get("idle_timeout", 0) / 1000
        self.last_input = self.task.clock()
        self.said_idle = False

    def before(self, root: Any, source: str, ts: int, lineage: Lineage | None) -> None:
        """Every record read moves the progress (filtered ones too).

        The records sent carry the progress before it.
        """
        self.before_progress = self.progress.current
        self.progress.advance_to(ts)
        if self.idle_after_s:  # the clock is read per record only when an idle timeout is set
            self.last_input = self.task.clock()
            self.said_idle = False

    def sources(self, roots: list[Any]) -> list[str]:
        """Not an EventTime: one progress for the task."""
        return []

    def control(self, root: Any, kind: bytes, source: str, watermark: int) -> None:
        """Forward a watermark or end-of-stream."""
        self.last_input = self.task.clock()
        self.said_idle = False
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
        try:
            self.task.collector.send(
                OutgoingMessageEnvelope(self.output, key=new_key, message=value, headers=headers, id=rid)
            )
        except SerdeError as exc:  # the key function's result: name key_by, not its topic's keys
            msg = (
                f"in the pipeline's key_by() at {self.node.where}: {exc} (key_by(..., key=samzapy.long) "
                "sends int keys; or return a str)"
            )
            raise SerdeError(msg) from exc

    def tick(self) -> None:
        """Broadcast the progress when it moved."""
        if self.progress.current > self.announced:
            self._announce(WATERMARK)
        idle_for = self.task.clock() - self.last_input
        if self.idle_after_s > 0 and not self.said_idle and idle_for >= self.idle_after_s:
            self._announce(IDLE)  # decided here, in the intermediate topic: a replay takes it as is
            self.said_idle = True

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
        event_ms: int = call_user(self, self.ts_fn, value)  # type: ignore[arg-type]
        return event_ms

    def control(self, envelope: Any, kind: bytes, source: str | None, watermark: int) -> None:
        """A control record of the topic (its source is the topic)."""
        for clock in self.clocks:
            clock.control(self, kind, self.topic, watermark)


class TableRoot(Root):
    """An ``app.table``: writes the table store and tells the joins reading it.

    The store is written unless a table-table join does.
    """

    def __init__(self, task: PipelineTask, node: Node, topic: str, store: Any, versioned: Any) -> None:
        super().__init__(task, node, topic)
        self.store = store
        self.versioned = versioned
        self.writers: list[tuple[Any, str]] = []  # (TableTableStage, side)
        self.readers: list[Any] = []
        #: Whether the store holds ``{"offset", "value"}`` entries (a table-table join's side).
        self.entries = False
        self.map_values = node.args.get("map_values")

    def receive(self, envelope: Any) -> None:
        """A table update (``None`` deletes).

        ``map_values=`` of the table maps the value, after its time was read from it.
        """
        key, value = envelope.key, envelope.message
        # a delete has no value to read a time from: it takes the record's timestamp, as
        # pageview_enrich's event-time table does (a versioned table drops a version older than
        # its history, which MIN_MS always was: the delete was lost)
        ts = envelope.timestamp if self.ts_fn is None or value is None else self._time(value)
        if value is not None and self.map_values is not None:
            value = call_user(self, self.map_values, value)  # type: ignore[arg-type]
        if self.writers:
            for join, side in self.writers:
                join.update(side, key, value, ts)
        elif self.versioned is None:
            self.store.put(key, value)
        for reader in self.readers:
            reader.table_update(key, value, ts)
        for child in self.children:
            child.push(key, value, ts, None)

    def control(self, envelope: Any, kind: bytes, source: str | None, watermark: int) -> None:
        """A control record of the table's topic.

        To its clocks, and its end to the joins reading it (a versioned table's end releases the
        records waiting for its progress, also in a partition that received no update at all).
        """
        super().control(envelope, kind, source, watermark)
        if kind == END_OF_STREAM:
            for reader in self.readers:
                reader.table_ended()


class KeyByReceive(Root):
    """The receiving half of ``key_by``.

    Drops re-sent records by lineage sequence, then hands each record on with its lineage.
    """

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


class ForeignKeyRoot(Root):
    """A foreign-key join's subscription or response topic: hands each record to the join."""

    def __init__(self, task: PipelineTask, node: Node, topic: str, join: Any, role: str) -> None:
        super().__init__(task, node, topic)
        self.join = join
        self.role = role

    def receive(self, envelope: Any) -> None:
        """A subscription (to the right half) or a response (to the left half)."""
        if self.role == "subscriptions":
            self.join.subscribed(envelope)
        else:
            self.join.resolved(envelope)

    def control(self, envelope: Any, kind: bytes, source: str | None, watermark: int) -> None:
        """Not event time: nothing to do."""

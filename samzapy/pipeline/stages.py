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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samzapy.errors import SerdeError
from samzapy.operators import (
    Deduplicator,
)
from samzapy.operators.event_time import (
    Lineage,
)
from samzapy.pipeline.api import Node, function_where
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask


def call_user(stage: Stage, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an exception gets a note naming the stage and where the function is defined.

    The exception keeps its type (the error policy's ``task.ignored.exceptions`` still matches).
    """
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
        """The name of ``raw`` (a lineage source or a topic) as this clock knows it.

        Cached: once per record on the hot path.
        """
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
        try:
            self.task.collector.send(OutgoingMessageEnvelope(self.stream, key=key, message=value, id=rid))
        except SerdeError as exc:  # the Error line names the user's to(), not samzapy's frames
            msg = f"in the pipeline's to() at {self.node.where}: {exc} (to()'s key=/value= set them)"
            raise SerdeError(msg) from exc
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

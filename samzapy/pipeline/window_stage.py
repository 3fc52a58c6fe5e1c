"""The window stage of a pipeline.

The page-view counter's logic (:mod:`samzapy.jobs.pageview_counter`) for any key, window kind
and aggregation.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from samzapy.operators import (
    CountAggregation,
    CountWindows,
    HoppingWindows,
    SessionWindows,
    SlidingAggregation,
    SlidingWindows,
    TumblingWindows,
    WindowedAggregation,
)
from samzapy.operators.event_time import (
    END_OF_STREAM,
    IDLE,
    EventTime,
    Lineage,
    StoredCounter,
    late_bound,
    window_closed,
)
from samzapy.operators.key_encoding import MIN_MS
from samzapy.output_ids import window_id
from samzapy.pipeline.api import Node
from samzapy.pipeline.specs import Counted, Hopping, Session, Sliding, Tumbling
from samzapy.pipeline.stages import Clock
from samzapy.serdes import StringSerde
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask

#: The window operators' namespace and the late counter key (as the page-view counter's).
WINDOW_NAMESPACE = b"cw"
LATE_KEY = b"\x00late"
EMIT_BATCH = 10_000


class WindowStage(Clock):
    """``window(...)``: the page-view counter's logic for any key, window kind and aggregation.

    The logic of :mod:`samzapy.jobs.pageview_counter`, over one store (windows ``cw``, event
    time ``et``, the late count).
    """

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
        if window_closed(self.assigner, ts, self.bound):
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
                # the id downstream upserts by: the final result's own id, on the updates and
                # early results too (their record ids differ: an input's, an early digest)
                value["window_id"] = r.window or window_id(r.key, r.start, r.end)
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

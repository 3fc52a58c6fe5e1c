"""Stage 2 of "page views per user per hour": count each user's views per event-time window.

Input ``pageviews-by-user`` (JSON page views keyed by user_id, written by
:mod:`samzapy.jobs.pageview_repartition`, or any stream keyed by user); output
``pageview-counts``: one final record per (user, window),
``{"user_id", "window_start", "window_end", "count"}`` keyed by user_id, with the window's
id (``w:<hex user>:<start>:<end>``) as ``samzapy.id``. Config:
``config/pageview-counter.properties``.

Application keys:

* ``window.type`` — ``tumbling`` (default), ``hopping``, ``session``, ``sliding`` or
  ``count``; ``window.size.ms`` (default one hour: the window size, or for ``sliding`` the
  largest time difference between two views of a window), ``window.advance.ms`` (hopping,
  default half the size), ``window.gap.ms`` (sessions, default 30 minutes),
  ``window.count.size`` and ``window.count.step`` (count windows: views per window, and how
  many views apart windows start; default: the size, i.e. tumbling); ``count`` after a
  repartition counts views in the order the intermediate partition holds them, which
  depends on how the upstream tasks' outputs interleaved (a rerun or a replay over the same
  intermediate topic gives the same windows); a sliding window's aggregate is merged from
  per-time buckets, so it does not depend on the order the views arrive in: after a
  repartition, with an allowed lateness above the views' disorder, the windows are those of
  the definition (tested through the repartition stage with kill -9 rounds);
* ``window.emit`` — ``final`` (default: one record per window when it closes) or ``update``
  (also a record on every change); ``window.early.fire.ms`` — also the changed windows'
  current counts every that many ms of processing time (0: off). Non-final records carry
  ``"final": false``, every record then carries ``window_id`` (to upsert by) and ``late``
  (true for a revision of a window whose end its source's progress had passed);
* ``window.allowed.lateness.ms`` — how far behind its source's progress a view may be and
  still count (default 0);
* ``window.late.stream`` — where late views go (empty: dropped, but always counted in the
  ``late-messages`` metric and the stored ``late-messages-total`` gauge);
* ``window.output.stream`` — default ``kafka.pageview-counts``;
* ``watermark.upstream.tasks`` — the number of tasks of the repartition job (the partition
  count of its input); 0 when the input is not written by one: then the sources are the
  task's own input streams;
* ``window.store`` — default ``pageview-counts`` (bytes, with a changelog).

A window is emitted (finally) once, when the watermark (the minimum over sources of their progress,
minus the allowed lateness) passes its end, from ``window()`` or when a control record moves
the watermark. ``end-of-stream`` from every source closes every window. An ``idle`` control
record (sent by the repartition stage after ``window.idle.timeout.ms`` without input) takes
its source out of the watermark until the source's next record. Count windows do not
use the watermark: a window is emitted on its last view, and an incomplete one stays open.
"""

from __future__ import annotations

import time
from typing import Any, Literal, cast

from samzapy import (
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    TaskContext,
    TaskCoordinator,
    WindowableTask,
)
from samzapy.config import Config
from samzapy.operators import (
    CountAggregation,
    CountWindows,
    HoppingWindows,
    SessionWindows,
    SlidingAggregation,
    SlidingWindows,
    TumblingWindows,
    Watermark,
    WindowedAggregation,
    count,
    window_id,
)
from samzapy.operators.event_time import (
    END_OF_STREAM,
    IDLE,
    EventTime,
    SequenceDedup,
    StoredCounter,
    control_of,
    input_streams,
    late_bound,
    lineage_of,
    window_closed,
)

HOUR_MS = 3_600_000
#: The windows' namespace in the store (their key layout: :mod:`samzapy.operators.window_layout`).
WINDOW_NAMESPACE = b"cw"
#: The store key of the late views' count (a :class:`StoredCounter`).
LATE_KEY = b"\x00late"
#: Closed windows emitted (and purged) per store scan.
EMIT_BATCH = 10_000


class PageViewCounterTask(StreamTask, InitableTask, WindowableTask):
    """Counts page views per user per window; see the module docstring."""

    @classmethod
    def state_layouts(cls, config: Config) -> dict[str, Any]:
        """How the window store reads as data and moves in a reshard.

        See :mod:`samzapy.operators.state_layout`: the tumbling, hopping and session windows'
        layout (sliding and count windows are not described yet). The task's own entries: the
        event time's watermarks, the sequences of the upstream sources, the late count.
        """
        from samzapy.operators.event_time import counter_entries, event_time_entries, sequence_entries
        from samzapy.operators.window_layout import WindowLayout

        own = (*event_time_entries(), *sequence_entries(), *counter_entries(LATE_KEY))
        return {config.get_str("window.store", "pageview-counts"): WindowLayout(WINDOW_NAMESPACE, own)}

    def init(self, context: TaskContext) -> None:
        """Read the config; rebuild the operators over the (restored) store."""
        config = context.config
        store = context.get_store(config.get_str("window.store", "pageview-counts"))
        self.assigner: Any = _assigner(config)
        self.lateness = config.get_int("window.allowed.lateness.ms", 0)
        upstream = config.get_int("watermark.upstream.tasks", 0)
        sources = [str(i) for i in range(upstream)] if upstream > 0 else input_streams(context.inputs)
        self.time = EventTime(store, sources, self.lateness)
        # checked by the window operators (final or update)
        emit = cast("Literal['final', 'update']", config.get_str("window.emit", "final"))
        early = config.get_int("window.early.fire.ms", 0)
        self.plain = emit == "final" and early == 0  # today's output records, unchanged
        self.windows: Any = _operator(
            store, self.assigner, self.time.watermark, emit, early, self.lateness, context
        )
        self.dedup = SequenceDedup(store)
        self.output = SystemStream.parse(config.get_str("window.output.stream", "kafka.pageview-counts"))
        late = config.get_str("window.late.stream", "").strip()
        self.late_stream = SystemStream.parse(late) if late else None
        self.task_name = context.task_name
        self.late = context.metrics.counter("late-messages")
        self.duplicates = context.metrics.counter("duplicates-dropped")
        self.late_total = StoredCounter(store, LATE_KEY)
        context.metrics.gauge("late-messages-total", lambda: self.late_total.value)
        context.metrics.gauge("watermark", lambda: self.time.watermark.current)

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Count a view in its window (or as late); move the watermark on control records."""
        control = control_of(envelope)
        if control is not None:
            source = control.source if control.source is not None else envelope.stream
            if control.kind == END_OF_STREAM:
                advanced = self.time.end(source)
            elif control.kind == IDLE:
                advanced = self.time.idle(source)
            else:
                advanced = self.time.advance(source, control.watermark)
            if advanced:
                self._emit_closed(collector)
            return
        view = envelope.message
        t = view["ts"]
        lineage = lineage_of(envelope)
        if lineage is None:
            bound = self.time.watermark.current
            self.time.advance(envelope.stream, t)
        else:
            if self.dedup.is_duplicate(lineage.source, lineage.sequence):
                self.duplicates.inc()
                return
            # Lateness is judged by the view's own source, so it does not depend on how the
            # upstream tasks' outputs interleave in this partition.
            bound = late_bound(lineage.progress, self.lateness)
            self.time.advance(lineage.source, max(lineage.progress, t))
        if window_closed(self.assigner, t, bound):
            self._late(envelope, collector)
            return
        if isinstance(self.assigner, HoppingWindows):
            # Per view, the windows its own source had closed are closed (module docstring).
            added = self.windows.add(envelope.key.encode(), t, view, closed_before=bound)
        else:
            added = self.windows.add(envelope.key.encode(), t, view)
        if added.late:
            self._late(envelope, collector)
        elif added.updates:
            self._send_results(added.updates, collector)

    def _late(self, envelope: IncomingMessageEnvelope, collector: MessageCollector) -> None:
        self.late.inc()
        self.late_total.inc()
        if self.late_stream is not None:
            late_id = f"late:{self.task_name}:{envelope.stream}:{envelope.offset}"
            collector.send(
                OutgoingMessageEnvelope(
                    self.late_stream, key=envelope.key, message=envelope.message, id=late_id
                )
            )

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Emit the windows the watermark has passed, and the early results when due."""
        self._emit_closed(collector)
        if not self.plain:
            self._send_results(self.windows.fire_early(int(time.time() * 1000)), collector)

    def _emit_closed(self, collector: MessageCollector) -> None:
        if isinstance(self.windows, CountAggregation):
            return  # count windows close on their last view, in process()
        # In batches: the memory held while emitting stays bounded when a watermark move (or
        # end-of-stream) closes very many windows at once.
        while results := self.windows.close_due(limit=EMIT_BATCH):
            self._send_results(results, collector)

    def _send_results(self, results: list[Any], collector: MessageCollector) -> None:
        for result in results:
            user = result.key.decode()
            message = {
                "user_id": user,
                "window_start": result.start,
                "window_end": result.end,
                "count": result.value,
            }
            if not self.plain:
                message["window_id"] = self._window_id(result)
                message["final"] = result.final
                message["late"] = result.late
            collector.send(OutgoingMessageEnvelope(self.output, key=user, message=message, id=result.id))

    @staticmethod
    def _window_id(result: Any) -> str:
        """The id downstream upserts by (a final result's own id)."""
        if result.window is not None:
            own: str = result.window
            return own
        return window_id(result.key, result.start, result.end)


def _assigner(config: Any) -> Any:
    """The window kind of ``window.type``."""
    kind = config.get_str("window.type", "tumbling")
    size = config.get_int("window.size.ms", HOUR_MS)
    if kind == "tumbling":
        return TumblingWindows(size)
    if kind == "hopping":
        return HoppingWindows(size, config.get_int("window.advance.ms", size // 2))
    if kind == "session":
        return SessionWindows(config.get_int("window.gap.ms", HOUR_MS // 2))
    if kind == "sliding":
        return SlidingWindows(size)
    if kind == "count":
        n = config.get_int("window.count.size", 100)
        return CountWindows(n, config.get_int("window.count.step", n))
    msg = f"window.type must be one of tumbling, hopping, session, sliding, count; got {kind!r}"
    raise ValueError(msg)


def _operator(
    store: Any,
    assigner: Any,
    watermark: Watermark,
    emit: Literal["final", "update"],
    early: int,
    lateness: int,
    context: TaskContext,
) -> Any:
    """The window operator for ``assigner`` over ``store`` (namespace :data:`WINDOW_NAMESPACE`)."""
    if isinstance(assigner, CountWindows):
        return CountAggregation(
            store, assigner, count(), emit=emit, early_fire_ms=early, namespace=WINDOW_NAMESPACE
        )
    options = {
        "emit": emit,
        "early_fire_ms": early,
        "watermark_lateness_ms": lateness,
        "namespace": WINDOW_NAMESPACE,
        "metrics": context.metrics,
    }
    if isinstance(assigner, SlidingWindows):
        return SlidingAggregation(store, assigner, count(), watermark, **options)
    return WindowedAggregation(store, assigner, count(), watermark, **options)

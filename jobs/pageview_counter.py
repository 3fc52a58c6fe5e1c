"""Stage 2 of "page views per user per hour": count each user's views per event-time window.

Input ``pageviews-by-user`` (JSON page views keyed by user_id, written by
:mod:`samzapy.jobs.pageview_repartition`, or any stream keyed by user); output
``pageview-counts``: one final record per (user, window),
``{"user_id", "window_start", "window_end", "count"}`` keyed by user_id, with the window's
id (``w:<hex user>:<start>:<end>``) as ``samzapy.id``. Config:
``config/pageview-counter.properties``.

Application keys:

* ``window.type`` — ``tumbling`` (default) or ``session``; ``window.size.ms`` (default one
  hour) or ``window.gap.ms`` (sessions, default 30 minutes);
* ``window.allowed.lateness.ms`` — how far behind its source's progress a view may be and
  still count (default 0);
* ``window.late.stream`` — where late views go (empty: dropped, but always counted in the
  ``late-messages`` metric and the stored ``late-messages-total`` gauge);
* ``window.output.stream`` — default ``kafka.pageview-counts``;
* ``watermark.upstream.tasks`` — the number of tasks of the repartition job (the partition
  count of its input); 0 when the input is not written by one: then the sources are the
  task's own input streams;
* ``window.store`` — default ``pageview-counts`` (bytes, with a changelog).

A window is emitted once, when the watermark (the minimum over sources of their progress,
minus the allowed lateness) passes its end, from ``window()`` or when a control record moves
the watermark. ``end-of-stream`` from every source closes every window.
"""

from __future__ import annotations

from typing import Any

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream, WindowableTask
from samzapy.operators import SessionWindows, TumblingWindows, WindowedAggregation, count
from samzapy.operators.event_time import (
    END_OF_STREAM,
    EventTime,
    SequenceDedup,
    StoredCounter,
    control_of,
    input_streams,
    late_bound,
    lineage_of,
)

HOUR_MS = 3_600_000
#: Closed windows emitted (and purged) per store scan.
EMIT_BATCH = 10_000


class PageViewCounterTask(StreamTask, InitableTask, WindowableTask):
    """Counts page views per user per window; see the module docstring."""

    def init(self, context: Any) -> None:
        """Read the config; rebuild the operators over the (restored) store."""
        config = context.config
        store = context.get_store(config.get_str("window.store", "pageview-counts"))
        kind = config.get_str("window.type", "tumbling")
        if kind == "tumbling":
            self.assigner: Any = TumblingWindows(config.get_int("window.size.ms", HOUR_MS))
        elif kind == "session":
            self.assigner = SessionWindows(config.get_int("window.gap.ms", HOUR_MS // 2))
        else:
            msg = f"window.type must be 'tumbling' or 'session', got {kind!r}"
            raise ValueError(msg)
        self.lateness = config.get_int("window.allowed.lateness.ms", 0)
        upstream = config.get_int("watermark.upstream.tasks", 0)
        sources = [str(i) for i in range(upstream)] if upstream > 0 else input_streams(context.inputs)
        self.time = EventTime(store, sources, self.lateness)
        self.windows = WindowedAggregation(
            store, self.assigner, count(), self.time.watermark, namespace=b"cw", metrics=context.metrics
        )
        self.dedup = SequenceDedup(store)
        self.output = SystemStream.parse(config.get_str("window.output.stream", "kafka.pageview-counts"))
        late = config.get_str("window.late.stream", "").strip()
        self.late_stream = SystemStream.parse(late) if late else None
        self.task_name = context.task_name
        self.late = context.metrics.counter("late-messages")
        self.duplicates = context.metrics.counter("duplicates-dropped")
        self.late_total = StoredCounter(store, b"\x00late")
        context.metrics.gauge("late-messages-total", lambda: self.late_total.value)
        context.metrics.gauge("watermark", lambda: self.time.watermark.current)

    def process(self, envelope, collector, coordinator) -> None:
        """Count a view in its window (or as late); move the watermark on control records."""
        control = control_of(envelope)
        if control is not None:
            source = control.source if control.source is not None else envelope.stream
            advanced = (
                self.time.end(source)
                if control.kind == END_OF_STREAM
                else self.time.advance(source, control.watermark)
            )
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
        if self._closed(t, bound) or self.windows.add(envelope.key.encode(), t, view).late:
            self._late(envelope, collector)

    def _closed(self, t: int, bound: int) -> bool:
        assigner = self.assigner
        if isinstance(assigner, SessionWindows):
            return t + assigner.gap_ms <= bound
        # The end of t's tumbling window, without the assigner's list (once per view).
        return t - (t - assigner.offset_ms) % assigner.size_ms + assigner.size_ms <= bound

    def _late(self, envelope, collector) -> None:
        self.late.inc()
        self.late_total.inc()
        if self.late_stream is not None:
            late_id = f"late:{self.task_name}:{envelope.stream}:{envelope.offset}"
            collector.send(
                OutgoingMessageEnvelope(
                    self.late_stream, key=envelope.key, message=envelope.message, id=late_id
                )
            )

    def window(self, collector, coordinator) -> None:
        """Emit the windows the watermark has passed."""
        self._emit_closed(collector)

    def _emit_closed(self, collector) -> None:
        # In batches: the memory held while emitting stays bounded when a watermark move (or
        # end-of-stream) closes very many windows at once.
        while results := self.windows.close_due(limit=EMIT_BATCH):
            self._send_results(results, collector)

    def _send_results(self, results: list[Any], collector) -> None:
        for result in results:
            user = result.key.decode()
            collector.send(
                OutgoingMessageEnvelope(
                    self.output,
                    key=user,
                    message={
                        "user_id": user,
                        "window_start": result.start,
                        "window_end": result.end,
                        "count": result.value,
                    },
                    id=result.id,
                )
            )

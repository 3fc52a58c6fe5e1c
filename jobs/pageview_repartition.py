"""Stage 1 of "page views per user per hour": re-key page views (keyed by page) by user.

Input ``pageviews`` (JSON, keyed by page); output ``pageviews-by-user`` (the same JSON,
keyed by user_id), so that stage 2 (:mod:`samzapy.jobs.pageview_counter`) sees all of a
user's views in one task. Config: ``config/pageview-repartition.properties``.

Besides re-keying, the stage carries event time across the shuffle (as Samza's intermediate
streams carry watermark control messages): every forwarded view has a ``samzapy.lineage``
header (source partition, input offset, the source's progress before it), and every
``task.window.ms`` the task broadcasts its progress to every partition of the output as a
``watermark`` control record; an ``end-of-stream`` record on its input is broadcast too.
With ``window.idle.timeout.ms`` > 0, a task that has had no input for that long (processing
time) broadcasts an ``idle`` control record once, so that downstream windows close without
it; its next record makes it active again. The decision is in the intermediate stream, so a
replay of the downstream stage takes it at the same point. See
:mod:`samzapy.operators.event_time` and ``docs/patterns/window-aggregation.md``.
"""

from __future__ import annotations

import time
from typing import Any

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
from samzapy.errors import ConfigError
from samzapy.operators import ID_HEADER, RepartitionError, Watermark
from samzapy.operators.event_time import (
    CONTROL_HEADER,
    END_OF_STREAM,
    IDLE,
    LINEAGE_HEADER,
    WATERMARK,
    control_message,
    control_of,
    lineage_header,
)
from samzapy.operators.key_encoding import MIN_MS

_NOT_FORWARDED = {ID_HEADER, LINEAGE_HEADER, CONTROL_HEADER}


class EventTimeRepartitionTask(StreamTask, InitableTask, WindowableTask):
    """Re-keys a stream by :meth:`key_of` and forwards event-time progress (see the module).

    Config: ``repartition.output.stream`` (default :attr:`output_stream`), whose partition
    count must be given as ``systems.<system>.streams.<stream>.partitions`` (watermarks go to
    every partition), and a store ``repartition.store`` (default ``repartition-progress``,
    bytes, with a changelog) that keeps the task's progress, so that a replay after a crash
    tags records exactly as the first run did.
    """

    #: The intermediate stream, ``system.stream``.
    output_stream = ""

    def key_of(self, message: Any) -> Any:
        """The new key of ``message``."""
        raise NotImplementedError

    def time_of(self, message: Any) -> int:
        """The event time of ``message`` in ms."""
        raise NotImplementedError

    def init(self, context: TaskContext) -> None:
        """Read the config, open the progress store."""
        config = context.config
        self.output = SystemStream.parse(config.get_str("repartition.output.stream", self.output_stream))
        partitions = context.stream(self.output).partitions
        if partitions is None:
            msg = (
                f"set systems.{self.output.system}.streams.{self.output.stream}.partitions: the "
                "repartition task sends its progress to every partition of its output"
            )
            raise ConfigError(msg)
        self.partitions: int = partitions
        store = context.get_store(config.get_str("repartition.store", "repartition-progress"))
        self.source = str(context.partition)
        self.progress = Watermark(store, namespace=b"rp")
        self._announced = MIN_MS
        self._idle_after_s = config.get_int("window.idle.timeout.ms", 0) / 1000
        self._last_input = time.monotonic()
        self._said_idle = False

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Forward a record with its lineage, or act on a control record."""
        self._last_input = time.monotonic()
        self._said_idle = False
        control = control_of(envelope)
        if control is not None:
            if self.progress.advance_to(control.watermark) or control.kind == END_OF_STREAM:
                self._announce(collector, END_OF_STREAM if control.kind == END_OF_STREAM else WATERMARK)
            return
        message = envelope.message
        key = self.key_of(message)
        if key is None:
            msg = (
                f"cannot repartition the message at {envelope.system_stream_partition} offset "
                f"{envelope.offset}: {type(self).__qualname__}.key_of returned None"
            )
            raise RepartitionError(msg)
        before = self.progress.current
        self.progress.advance_to(self.time_of(message))
        headers = [h for h in envelope.headers if h[0] not in _NOT_FORWARDED]
        headers.append(lineage_header(self.source, envelope.offset, before))
        # forwarded header values may be None, which OutgoingMessageEnvelope's type does not admit
        # (a library type gap)
        collector.send(OutgoingMessageEnvelope(self.output, key=key, message=message, headers=headers))  # type: ignore[arg-type]

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Broadcast the progress when it moved since the last broadcast.

        Say the task is idle after ``window.idle.timeout.ms`` without input.
        """
        if self.progress.current > self._announced:
            self._announce(collector, WATERMARK)
        idle_for = time.monotonic() - self._last_input
        if self._idle_after_s > 0 and not self._said_idle and idle_for >= self._idle_after_s:
            self._announce(collector, IDLE)
            self._said_idle = True

    def _announce(self, collector: MessageCollector, kind: bytes) -> None:
        progress = self.progress.current
        headers, body = control_message(kind, self.source, progress)
        for partition in range(self.partitions):
            collector.send(
                OutgoingMessageEnvelope(
                    self.output,
                    message=body,
                    partition=partition,
                    headers=headers,
                    id=f"{kind.decode()}:{self.output.stream}:{self.source}:{progress}:{partition}",
                )
            )
        self._announced = progress


class PageViewRepartitionTask(EventTimeRepartitionTask):
    """Page views re-keyed by ``user_id``, event time ``ts``."""

    output_stream = "kafka.pageviews-by-user"

    def key_of(self, message: Any) -> Any:
        """The view's user."""
        return message["user_id"]

    def time_of(self, message: Any) -> int:
        """The view's event time."""
        event_ms: int = message["ts"]
        return event_ms

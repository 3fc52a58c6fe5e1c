"""Ad clicks joined to their impressions (a windowed stream-stream join, after Google's Photon).

Inputs ``impressions`` and ``clicks``, both JSON keyed by impression id (so co-partitioned);
outputs ``ad-clicks-joined`` (impression fields plus click fields, keyed by impression id) and
``unjoined-clicks`` (clicks whose impression did not arrive within the join window). Config:
``config/ad-click-join.properties``; semantics in ``docs/patterns/stream-stream-join.md``.

* A click at ``tc`` joins an impression at ``ti`` of the same id when
  ``tc - join.window.before.ms <= ti <= tc + join.window.after.ms``; either may arrive first:
  each waits in a store until its window has closed.
* The watermark is the minimum, over the two inputs, of the largest event time seen, minus
  ``join.allowed.lateness.ms`` (at least the inputs' disorder), so that one input racing
  ahead of the other never expires records the slower input still has to match.
* Each click id is decided **at most once ever** — joined, or sent to ``unjoined-clicks`` —
  through a registry store (Photon's IdRegistry) of decided click ids, garbage-collected
  after ``join.registry.retention.ms`` of event time. Duplicate clicks are dropped (counted in
  ``duplicate-clicks``). State is restored exactly after a crash, so a re-sent result has the
  same ``samzapy.id`` and bytes: exactly once eventually, after dedup by id.
* ``end-of-stream`` control records on both inputs close every window (``--exit-at-end``).
* ``join.state.layout`` (default 2) is the stores' layout
  (:mod:`samzapy.operators.stream_join_layout`): 2,
  :class:`~samzapy.operators.bucketed_join.BucketedStreamJoin` with the registry folded into
  the click buffer (a decided flag kept until the retention's
  horizon; about one changelog record per input event); 1, the layout before it
  (:class:`~samzapy.operators.StreamStreamJoin`, an expiry index, and the registry in
  ``join-state``). Layout 2 migrates layout 1's stores at start
  (:mod:`samzapy.operators.stream_join_migrate`; the old registry is still consulted until its
  retention has passed); layout 1 refuses layout 2's, naming the store.
"""

from __future__ import annotations

import logging
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
from samzapy.config import Config
from samzapy.config.properties import TypedGetters
from samzapy.operators import JoinRegistry, JoinResult, StreamStreamJoin
from samzapy.operators.bucketed_join import BUCKET_SPANS, BucketedStreamJoin, JoinLayoutError
from samzapy.operators.event_time import END_OF_STREAM, EventTime, control_of, input_streams
from samzapy.operators.key_encoding import prefix_end
from samzapy.operators.registry import IDS_TAG
from samzapy.operators.stream_join_layout import LAYOUT_KEY
from samzapy.operators.stream_join_migrate import migrate_to_layout_2
from samzapy.stores.base import KeyValueStore

log = logging.getLogger(__name__)


def joined_record(click: dict[str, Any], impression: dict[str, Any] | None) -> dict[str, Any]:
    """The output: the impression's fields, then the click's, each in sorted key order.

    The times are renamed apart. Sorted keys: a buffered record comes back from the store with
    sorted keys, a live one in its own order, and a result re-sent after a crash must have the
    same bytes. An unjoined click is returned with sorted keys.

    >>> click = {"ts": 9, "impression_id": "i", "click_id": "c"}
    >>> joined_record(click, {"ts": 5, "impression_id": "i", "ad": "a"})
    {'ad': 'a', 'impression_id': 'i', 'impression_ts': 5, 'click_id': 'c', 'click_ts': 9}
    >>> joined_record(click, None)
    {'click_id': 'c', 'impression_id': 'i', 'ts': 9}
    """
    if impression is None:
        return dict(sorted(click.items()))
    record = {k: impression[k] for k in sorted(impression) if k != "ts"}
    record["impression_ts"] = impression["ts"]
    record.update({k: click[k] for k in sorted(click) if k not in ("ts", "impression_id")})
    record["click_ts"] = click["ts"]
    return record


#: The registry's namespace in ``join-state`` (layout 1).
REGISTRY_NAMESPACE = b"reg"
#: The join's stores: clicks (left), impressions (right), the expiry or pending index.
STORES = ("click-buffer", "impression-buffer", "join-expiry")


def _holds_entries(store: KeyValueStore[Any, Any]) -> bool:
    with store.all() as entries:
        return next(entries, None) is not None


def layout_of(config: TypedGetters) -> int:
    """The stores' layout the config asks for (``join.state.layout``, 1 or 2; default 2)."""
    layout = config.get_int("join.state.layout", 2)
    if layout not in (1, 2):
        msg = f"join.state.layout must be 1 or 2, got {layout}"
        raise ValueError(msg)
    return layout


class AdClickJoinTask(StreamTask, InitableTask, WindowableTask):
    """Joins clicks (left) to impressions (right) by impression id; see the module docstring."""

    @classmethod
    def state_layouts(cls, config: Config) -> dict[str, Any]:
        """How the stores read as data and move in a reshard (:mod:`samzapy.operators.state_layout`).

        The buffers and the expiry (layout 1) or pending (layout 2) index by impression id;
        ``join-state`` is the task's own (the inputs' watermarks; in layout 1 the registry of
        decided click ids), so are layout 2's meta entries.
        """
        from samzapy.operators.event_time import event_time_entries
        from samzapy.operators.registry import registry_entries
        from samzapy.operators.state_layout import TaskStateLayout
        from samzapy.operators.stream_join_layout import (
            JoinBucketLayout,
            JoinBufferLayout,
            JoinExpiryLayout,
            JoinPendingLayout,
        )

        if layout_of(config) == 1:
            buffer, index = JoinBufferLayout(), JoinExpiryLayout()
        else:
            buffer, index = JoinBucketLayout(), JoinPendingLayout()  # type: ignore[assignment]
        return {
            "click-buffer": buffer,
            "impression-buffer": buffer,
            "join-expiry": index,
            "join-state": TaskStateLayout((*event_time_entries(), *registry_entries(REGISTRY_NAMESPACE))),
        }

    def init(self, context: TaskContext) -> None:
        """Read the config; rebuild the join, registry and watermarks over the restored stores."""
        config = context.config
        self.clicks = config.get_str("join.clicks.stream", "clicks")
        self.impressions = config.get_str("join.impressions.stream", "impressions")
        inputs = input_streams(context.inputs)
        if sorted(inputs) != sorted([self.clicks, self.impressions]):
            msg = (
                f"task.inputs ({', '.join(inputs)}) must be the clicks stream '{self.clicks}' and "
                f"the impressions stream '{self.impressions}' (join.clicks.stream, join.impressions.stream)"
            )
            raise ValueError(msg)
        state = context.get_store("join-state")
        self.time = EventTime(state, inputs, config.get_int("join.allowed.lateness.ms", 10_000))
        retention = config.get_int("join.registry.retention.ms", 86_400_000)
        stores = [context.get_store(name) for name in STORES]
        windows: dict[str, Any] = {
            "window_before_ms": config.get_int("join.window.before.ms", 120_000),
            "window_after_ms": config.get_int("join.window.after.ms", 5_000),
            "grace_ms": config.get_int("join.grace.ms", 0),
            "kind": "left",
            "metrics": context.metrics,
        }
        self.registry: JoinRegistry | None = None
        self.legacy_registry: JoinRegistry | None = None
        self.join: StreamStreamJoin | BucketedStreamJoin
        if layout_of(config) == 1:
            if stores[2].get(LAYOUT_KEY) is not None:
                msg = (
                    f"store '{STORES[2]}' holds the click join's state in layout 2 (it has a layout "
                    "marker) and join.state.layout=1: remove join.state.layout=1 from the config"
                )
                raise JoinLayoutError(msg)
            self.registry = JoinRegistry(
                state, retention, namespace=REGISTRY_NAMESPACE, metrics=context.metrics
            )
            self.join = StreamStreamJoin(
                stores[0], stores[1], stores[2], self.time.watermark, joined_record, **windows
            )
        else:
            ids = REGISTRY_NAMESPACE + IDS_TAG
            with state.range(ids, prefix_end(ids)) as entries:
                registered = next(entries, None) is not None
            if registered:  # layout 1's registry: consulted, and collected, until it is empty
                self.legacy_registry = JoinRegistry(state, retention, namespace=REGISTRY_NAMESPACE)
            if stores[2].get(LAYOUT_KEY) is None and (registered or any(map(_holds_entries, stores))):
                registry = self.legacy_registry or JoinRegistry(
                    state, retention, namespace=REGISTRY_NAMESPACE
                )
                span = max(1, sum(windows[k] for k in ("window_before_ms", "window_after_ms", "grace_ms")))
                counts = migrate_to_layout_2(
                    stores[0],
                    stores[1],
                    stores[2],
                    registry,
                    bucket_ms=BUCKET_SPANS * span,
                    left_close_ms=windows["window_after_ms"] + windows["grace_ms"],
                )
                log.info(
                    "%s: the click join's stores migrated from layout 1 to 2: %s", context.task_name, counts
                )
            self.join = BucketedStreamJoin(
                stores[0],
                stores[1],
                stores[2],
                self.time.watermark,
                joined_record,
                once_retention_ms=retention,
                legacy_decided=None if self.legacy_registry is None else self.legacy_registry.is_registered,
                store_names=STORES,
                duplicates_metric="duplicate-clicks",
                **windows,
            )
        self.output = SystemStream.parse(config.get_str("join.output.stream", "kafka.ad-clicks-joined"))
        self.unjoined = SystemStream.parse(config.get_str("join.unjoined.stream", "kafka.unjoined-clicks"))
        self.duplicates = context.metrics.counter("duplicate-clicks")
        self.joined_count = context.metrics.counter("joined-clicks")
        self.unjoined_count = context.metrics.counter("unjoined-clicks")
        context.metrics.gauge("watermark", lambda: self.time.watermark.current)

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Buffer and match a click or an impression; move the watermark on control records."""
        control = control_of(envelope)
        if control is not None:
            source = envelope.stream
            advanced = (
                self.time.end(source)
                if control.kind == END_OF_STREAM
                else self.time.advance(source, control.watermark)
            )
            if advanced:
                self._expire(collector)
            return
        event = envelope.message
        key = envelope.key.encode()
        if envelope.stream == self.clicks:
            results = self.join.add_left(key, event["ts"], event, event["click_id"])
        else:
            results = self.join.add_right(key, event["ts"], event, event["impression_id"])
        self._decide(results, collector)
        self.time.advance(envelope.stream, event["ts"])

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Expire closed join windows (unjoined clicks out) and collect old registry entries."""
        self._expire(collector)
        if self.registry is not None:
            self.registry.gc()
        if self.legacy_registry is not None and isinstance(self.join, BucketedStreamJoin):
            self.legacy_registry.advance_to(self.join.max_decided)  # its horizon follows the join's
            self.legacy_registry.gc()

    def _expire(self, collector: MessageCollector) -> None:
        self._decide(self.join.expire(), collector)

    def _decide(self, results: list[JoinResult], collector: MessageCollector) -> None:
        """Send each result whose click id is not decided yet, and register it as decided.

        In layout 2 the join decided already.
        """
        for result in results:
            click, click_time = result.left, result.left_time
            assert click_time is not None  # every result has its click (a left join of clicks)
            if self.registry is not None and not self.registry.try_register(click["click_id"], click_time):
                self.duplicates.inc()
                continue
            if result.right is None:
                self.unjoined_count.inc()
                stream = self.unjoined
            else:
                self.joined_count.inc()
                stream = self.output
            collector.send(
                OutgoingMessageEnvelope(stream, key=result.key.decode(), message=result.value, id=result.id)
            )

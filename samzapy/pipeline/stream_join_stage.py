"""The stream-stream join stage of a pipeline, in either store layout of the join.

As :mod:`samzapy.jobs.ad_click_join` joins clicks to impressions, and with the same choice of
store layout (:mod:`samzapy.operators.stream_join_layout`):

* **Layout 2** (the default): :class:`~samzapy.operators.bucketed_join.BucketedStreamJoin`,
  time-bucket-first buffers, a pending index only for unmatched records of a side the join
  emits unmatched, and ``once=True`` as the buffered left record's *decided* flag, kept for
  ``retention`` ms of event time: each left record is decided at most once (joined, or sent
  unmatched), also when it matches several right records. About one changelog record per
  input event.
* **Layout 1** (``pipeline.join.state.layout=1``): :class:`~samzapy.operators.StreamStreamJoin`,
  an expiry index entry per record, and with ``once`` a
  :class:`~samzapy.operators.JoinRegistry` in the ``-time`` store that registers
  ``ids[0](left)``, or without ``ids`` the result's (pair's) id: a left record matching two
  right records is then joined twice.

Layout 2 rewrites layout 1's stores in place at start
(:func:`~samzapy.operators.stream_join_migrate.migrate_to_layout_2`, logged) and consults
layout 1's registry, until its entries pass the retention, for decisions whose buffered record
had already expired (by the left record's id with ``ids``, else by the result's id, as layout 1
registered them). Layout 1 refuses layout 2's stores, naming the store.

The stores keep their names and serdes (``<name>-left``, ``-right``, ``-expiry``: the expiry
or pending index, ``-time``: the event time and layout 1's registry), so a recorded plan
(:mod:`samzapy.pipeline.plan_check`) accepts the switch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samzapy.operators import JoinRegistry, StreamStreamJoin
from samzapy.operators.bucketed_join import BUCKET_SPANS, BucketedStreamJoin, JoinLayoutError
from samzapy.operators.event_time import END_OF_STREAM, EventTime, Lineage
from samzapy.operators.key_encoding import prefix_end
from samzapy.operators.registry import IDS_TAG
from samzapy.operators.stream_join_layout import LAYOUT_KEY
from samzapy.operators.stream_join_migrate import migrate_to_layout_2
from samzapy.pipeline.api import Node
from samzapy.pipeline.stages import Clock, Stage, call_user

if TYPE_CHECKING:
    from samzapy.pipeline.task import PipelineTask

log = logging.getLogger(__name__)

#: The application key that chooses the stream-stream joins' store layout (1 or 2).
LAYOUT_CONFIG_KEY = "pipeline.join.state.layout"
#: The join registry's namespace in a stream-stream join's ``-time`` store, layout 1 (as the
#: ad-click join task's in its ``join-state``).
REGISTRY_NAMESPACE = b"reg"
#: The counter of left records refused by join-once.
DUPLICATES_METRIC = "duplicates-dropped"


def layout_of(config: Any) -> int:
    """The store layout ``config`` asks for (:data:`LAYOUT_CONFIG_KEY`; default, and no config: 2)."""
    if config is None:
        return 2
    layout = config.get_int(LAYOUT_CONFIG_KEY, 2)
    if layout not in (1, 2):
        msg = f"{LAYOUT_CONFIG_KEY} must be 1 or 2 (the stream-stream joins' store layout), got {layout}"
        raise ValueError(msg)
    return int(layout)


def stream_join_layouts(stores: list[str], layout: int) -> dict[str, Any]:
    """How a stream-stream join's stores (left, right, expiry, time) read as data.

    As :meth:`samzapy.jobs.ad_click_join.AdClickJoinTask.state_layouts` declares its own: the
    buffers and the expiry (layout 1) or pending (layout 2) index by join key, the ``-time``
    store the task's own (the inputs' event time and layout 1's registry).
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

    left, right, index, time = stores
    buffer: Any = JoinBufferLayout() if layout == 1 else JoinBucketLayout()
    index_layout: Any = JoinExpiryLayout() if layout == 1 else JoinPendingLayout()
    own = TaskStateLayout((*event_time_entries(), *registry_entries(REGISTRY_NAMESPACE)))
    return {left: buffer, right: buffer, index: index_layout, time: own}


def _holds_entries(store: Any) -> bool:
    with store.all() as entries:
        return next(entries, None) is not None


class StreamJoinStage(Clock):
    """Two streams joined within a time bound, in the layout the config chooses (see the module).

    The event time (minimum progress of the inputs minus ``grace``) is in the ``-time`` store
    and moves after each record; ``once=True`` decides each left record at most once.
    """

    def __init__(self, task: PipelineTask, node: Node, stores: list[Any], key_serde: Any) -> None:
        super().__init__(task, node)
        self.left_store, self.right_store, self.index, self.time_store = stores
        left, right, index, _ = task._plan.stores_of[node.id]
        self.store_names = (left, right, index)
        self.serde = key_serde
        self.sides = [JoinSide(self, "left"), JoinSide(self, "right")]
        self.ids = node.args["ids"]
        self.layout = layout_of(task.context.config)
        #: Layout 1's registry: the one that decides (layout 1), or the one still consulted
        #: after a migration (layout 2, ``legacy``).
        self.registry: JoinRegistry | None = None
        self.legacy = False
        self.join: StreamStreamJoin | BucketedStreamJoin

    def start(self, sources: list[str]) -> None:
        """Build the operator over the restored stores, once the sources are known."""
        args = self.node.args
        self.time = EventTime(self.time_store, sources, args["grace"])
        self.join = self._layout_1() if self.layout == 1 else self._layout_2()

    def _windows(self) -> dict[str, Any]:
        args = self.node.args
        return {
            "window_before_ms": args["before"],
            "window_after_ms": args["after"],
            "kind": args["kind"],
            "metrics": self.task.metrics,
        }

    def _layout_1(self) -> StreamStreamJoin:
        if self.index.get(LAYOUT_KEY) is not None:
            msg = (
                f"store '{self.store_names[2]}' holds the join's state in layout 2 (it has a layout "
                f"marker) and {LAYOUT_CONFIG_KEY}=1: remove {LAYOUT_CONFIG_KEY}=1 from the config"
            )
            raise JoinLayoutError(msg)
        args = self.node.args
        if args["once"]:
            self.registry = JoinRegistry(
                self.time_store, args["retention"], namespace=REGISTRY_NAMESPACE, metrics=self.task.metrics
            )
        return StreamStreamJoin(
            self.left_store,
            self.right_store,
            self.index,
            self.time.watermark,
            self._joiner,
            **self._windows(),
        )

    def _layout_2(self) -> BucketedStreamJoin:
        args = self.node.args
        once = bool(args["once"])
        if once and self._registered():  # layout 1's registry: consulted and collected until empty
            self.registry = JoinRegistry(self.time_store, args["retention"], namespace=REGISTRY_NAMESPACE)
            self.legacy = True
        span = max(1, args["before"] + args["after"])  # the operator's grace is 0: grace is the event time's
        stores = (self.left_store, self.right_store, self.index)
        if self.index.get(LAYOUT_KEY) is None and (self.legacy or any(map(_holds_entries, stores))):
            registry = self.registry
            if once and registry is None:
                registry = JoinRegistry(self.time_store, args["retention"], namespace=REGISTRY_NAMESPACE)
            counts = migrate_to_layout_2(
                *stores,
                registry,
                bucket_ms=BUCKET_SPANS * span,
                left_close_ms=args["after"],
                kind=args["kind"],
                right_close_ms=args["before"],
            )
            log.info(
                "%s: the stores of join '%s' migrated from layout 1 to 2: %s",
                self.task.task_name,
                self.task._plan.names[self.node.id],
                counts,
            )
        # with ids, layout 1 registered the left record's id (the record id here); without, the pair's
        legacy = self.registry if self.ids is not None else None
        legacy_decided = None if legacy is None else legacy.is_registered
        return BucketedStreamJoin(
            *stores,
            self.time.watermark,
            self._joiner,
            once_retention_ms=args["retention"] if once else None,
            legacy_decided=legacy_decided,
            store_names=self.store_names,
            duplicates_metric=DUPLICATES_METRIC,
            **self._windows(),
        )

    def _registered(self) -> bool:
        ids = REGISTRY_NAMESPACE + IDS_TAG
        with self.time_store.range(ids, prefix_end(ids)) as entries:
            return next(entries, None) is not None

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
        """Expire closed records (unmatched ones of left/outer joins are pushed).

        Collect layout 1's registry's old entries (after a migration, its horizon follows the
        join's decisions).
        """
        self._results(self.join.expire())
        registry = self.registry
        if registry is None:
            return
        if isinstance(self.join, BucketedStreamJoin):
            registry.advance_to(self.join.max_decided)
        registry.gc()

    def _results(self, results: list[Any]) -> None:
        registry = self.registry
        for r in results:
            if registry is not None and r.left is not None and not self._first(registry, r):
                self.task.duplicates.inc()
                continue
            ts = max(t for t in (r.left_time, r.right_time) if t is not None)
            self.emit(self.serde.from_bytes(r.key), r.value, ts, r.id)

    def _first(self, registry: JoinRegistry, r: Any) -> bool:
        """Whether layout 1's registry lets the result out.

        Layout 1: it registers the left record's id (with ``ids``) or the result's. Layout 2
        decided already; a migrated registry without ``ids`` still refuses the pairs it holds.
        """
        if self.legacy:
            return self.ids is not None or not registry.is_registered(r.id)
        left_id = str(call_user(self, self.ids[0], r.left)) if self.ids else r.id
        return registry.try_register(left_id, r.left_time)


class JoinSide(Stage):
    """One side of a stream-stream join: what the side's stream pushes into."""

    def __init__(self, join: StreamJoinStage, side: str) -> None:
        super().__init__(join.task, join.node)
        self.join, self.side = join, side

    def push(self, key: Any, value: Any, ts: int, rid: str | None) -> None:
        """Add the record to its side."""
        self.join.add(self.side, key, value, ts, rid)

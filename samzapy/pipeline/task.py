"""The one task class every pipeline runs.

It builds the stages of its plan over its stores and hands each input record to the root of the
topic it came from.

``task.class=samzapy.pipeline.task:PipelineTask`` and the application key ``pipeline.app``
(the app's file or ``module:attribute``) are what :meth:`samzapy.pipeline.compiler.Plan.properties`
writes; the container, the harness and the Spark replay build this task like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from samzapy.operators.event_time import control_of
from samzapy.pipeline.api import Node, PipelineError
from samzapy.pipeline.compiler import APP_KEY, Plan
from samzapy.pipeline.join_stages import (
    ForeignKeyStage,
    JoinSide,
    LookupStage,
    StreamJoinStage,
    StreamTableStage,
    TableTableStage,
    TemporalJoinStage,
    join_state_layouts,
)
from samzapy.pipeline.loader import load_app
from samzapy.pipeline.roots import ForeignKeyRoot, KeyByReceive, KeyBySend, Root, TableRoot
from samzapy.pipeline.stages import (
    BranchStage,
    Clock,
    DedupStage,
    FilterStage,
    FlatMapStage,
    MapStage,
    ProcessStage,
    SinkStage,
    Stage,
    ToStage,
)
from samzapy.pipeline.window_stage import WindowStage
from samzapy.serdes import BUILTIN_SERDES
from samzapy.stores.versioned import VersionedStore
from samzapy.streams import SystemStream
from samzapy.task import (
    ClosableTask,
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    StreamTask,
    TaskCoordinator,
    WindowableTask,
)

_SIMPLE = {
    "map": MapStage,
    "filter": FilterStage,
    "flat_map": FlatMapStage,
    "branch": BranchStage,
    "to": ToStage,
    "sink": SinkStage,
}


class PipelineTask(StreamTask, InitableTask, WindowableTask, ClosableTask):
    """Runs the stages of a pipeline for one partition (see the module)."""

    #: Set by :class:`samzapy.pipeline.testing.PipelineHarness` to skip loading ``pipeline.app``.
    plan: Plan | None = None
    #: Processing time in seconds (a key_by's idle timeout); the harness gives its wall clock.
    clock: Callable[[], float] = staticmethod(time.monotonic)

    @classmethod
    def state_layouts(cls, config: Any) -> dict[str, Any]:
        """How the stores read as data (:mod:`samzapy.operators.state_layout`).

        The join stages' as their task versions' (:func:`samzapy.pipeline.join_stages.join_state_layouts`;
        a stream-stream join's in the layout the config chooses).
        """
        plan = cls.plan
        if plan is None:
            plan = load_app(config.get_str(APP_KEY), config.location(APP_KEY)).plan()
        return join_state_layouts(plan, config)

    def init(self, context: Any) -> None:
        """Load the plan, build the stages over the task's stores, wire roots and clocks."""
        plan = self.plan
        if plan is None:
            plan = load_app(context.config.get_str(APP_KEY), context.config.location(APP_KEY)).plan()
        self._plan = plan
        self.context = context
        self.task_name = context.task_name
        self.source_name = str(context.partition)
        self.metrics = context.metrics
        self.duplicates = context.metrics.counter("duplicates-dropped")
        self.collector: Any = None
        self.envelope: Any = None
        self._seq = 0
        self._stages: dict[int, Stage] = {}
        self._senders: dict[int, KeyBySend] = {}
        self.roots: dict[str, list[Root]] = {}
        self._root_of: dict[int, Root] = {}
        self._feeding: dict[int, list[Root]] = {}
        self._build(plan)

    # ------------------------------------------------------------------ building
    def _store(self, name: str) -> Any:
        return self.context.get_store(name)

    def _serde(self, node: Node) -> Any:
        name = node.key_serde or "bytes"
        factory = BUILTIN_SERDES.get(name)
        if factory is None:
            msg = f"{node.where}: a window or join needs a built-in key serde, got '{name}'"
            raise PipelineError(msg)
        return factory()

    def _partitions(self, topic: str) -> int:
        count: int | None = self.context.stream(SystemStream("kafka", topic)).partitions
        if count is None:
            msg = (
                f"the partition count of intermediate topic '{topic}' is not known: run the app "
                "with samzapy run (it asks the broker), or give App(..., partitions=N)"
            )
            raise PipelineError(msg)
        return count

    def _build(self, plan: Plan) -> None:
        nodes = plan.app.nodes
        tables: dict[int, TableRoot] = {}
        for node in nodes:
            self._make(plan, node, tables)
        # wire children: a node's executor gets its children's executors
        for node in nodes:
            parent = self._stage_of(node)
            for child in plan.children[node.id]:
                target = self._input_of(child, node)
                if target is not None and parent is not None:
                    parent.children.append(target)
        for root_list in self.roots.values():
            for root in root_list:
                self._attach_clocks(root)
        for stage in self._stages.values():
            if isinstance(stage, (WindowStage, StreamJoinStage)):
                feeding = self._feeding.get(id(stage))
                if not feeding:
                    msg = f"{stage.node.where}: {stage.node.kind}() is not fed by any stream of the job"
                    raise PipelineError(msg)
                stage.start(stage.sources(feeding))

    def _stage_of(self, node: Node) -> Any:
        """What pushes the node's output: its stage, or its root for sources and key_by."""
        if node.kind in ("source", "table", "key_by"):
            return self._root_of[node.id]
        return self._stages.get(node.id)

    def _input_of(self, child: Node, parent: Node) -> Stage | None:
        """What takes ``parent``'s output in ``child``."""
        if child.kind == "key_by":
            return self._senders[child.id]
        if child.kind == "stream_stream_join":
            join = self._stages[child.id]
            assert isinstance(join, StreamJoinStage)
            return join.sides[0 if child.parents[0] is parent else 1]
        if child.kind in ("stream_table_join", "lookup") and child.parents[1] is parent:
            return None  # the table side: the table root tells the join (readers/writers)
        if child.kind in ("table_table_join", "fk_join"):
            return None
        return self._stages.get(child.id)

    def _make(self, plan: Plan, node: Node, tables: dict[int, TableRoot]) -> None:
        kind = node.kind
        stores = plan.stores_of.get(node.id, [])
        if kind == "source":
            self._add_root(node, Root(self, node, node.args["topic"]))
        elif kind == "table":
            store = self._store(stores[0]) if stores else None  # none: a foreign-key join keeps it
            versioned = None
            if node.args.get("versioned") is not None:
                assert store is not None  # a versioned table has its store (compiler: versioned-table)
                versioned = VersionedStore(store, node.args["versioned"])
            root = TableRoot(self, node, node.args["topic"], store, versioned)
            tables[node.id] = root
            self._add_root(node, root)
        elif kind == "global_table":
            pass
        elif kind == "key_by":
            topic = plan.intermediates[node.id]
            store = self._store(stores[0])
            partitions = self._partitions(topic)
            self._senders[node.id] = KeyBySend(self, node, store, topic, partitions)
            self._add_root(node, KeyByReceive(self, node, topic, store, partitions))
        elif kind in _SIMPLE:
            self._stages[node.id] = _SIMPLE[kind](self, node)
        elif kind in ("branch_out", "merge", "changes"):
            self._stages[node.id] = Stage(self, node)
        elif kind == "window":
            self._stages[node.id] = WindowStage(self, node, self._store(stores[0]), self._serde(node))
        elif kind == "dedup":
            self._stages[node.id] = DedupStage(self, node, self._store(stores[0]))
        elif kind == "process":
            self._stages[node.id] = ProcessStage(self, node, {s: self._store(s) for s in stores})
        elif kind == "lookup":
            table = node.parents[1]
            self._stages[node.id] = LookupStage(self, node, self._store(plan.stores_of[table.id][0]))
        elif kind == "stream_table_join":
            self._make_stream_table(plan, node, tables[node.parents[1].id], stores)
        elif kind == "table_table_join":
            left, right = (tables[p.id] for p in node.parents)
            left.entries = right.entries = True  # {"offset", "value"}: the versions name the ids
            stage = TableTableStage(self, node, left.store, right.store, self._store(stores[0]))
            left.writers.append((stage, "left"))
            right.writers.append((stage, "right"))
            self._stages[node.id] = stage
        elif kind == "fk_join":
            self._make_foreign_key(plan, node, tables, stores)
        elif kind == "stream_stream_join":
            self._stages[node.id] = StreamJoinStage(
                self, node, [self._store(s) for s in stores], self._serde(node)
            )
        else:
            msg = f"{node.where}: stage kind '{kind}' is not supported"
            raise PipelineError(msg)

    def _make_foreign_key(
        self, plan: Plan, node: Node, tables: dict[int, TableRoot], stores: list[str]
    ) -> None:
        left, right = (tables[p.id] for p in node.parents)
        topics = plan.fk_topics[node.id]
        stage = ForeignKeyStage(
            self,
            node,
            [self._store(s) for s in stores],
            topics,
            self._serde(left.node),
            self._serde(right.node),
        )
        left.writers.append((stage, "left"))
        right.writers.append((stage, "right"))
        self._stages[node.id] = stage
        for topic, role in zip(topics, ("subscriptions", "responses"), strict=True):
            self.roots.setdefault(topic, []).append(ForeignKeyRoot(self, node, topic, stage, role))

    def _make_stream_table(self, plan: Plan, node: Node, table: TableRoot, stores: list[str]) -> None:
        if table.versioned is not None:
            stage: Any = TemporalJoinStage(
                self, node, table.versioned, self._store(stores[0]), self._serde(node)
            )
        else:
            stage = StreamTableStage(self, node, table)
        table.readers.append(stage)
        self._stages[node.id] = stage

    def _add_root(self, node: Node, root: Root) -> None:
        self._root_of[node.id] = root
        self.roots.setdefault(root.topic, []).append(root)

    def _attach_clocks(self, root: Root) -> None:
        """Every clock below ``root`` up to the next key_by (inclusive) learns of its records."""
        seen: set[int] = set()
        todo: list[Stage] = list(root.children)
        while todo:
            stage = todo.pop()
            target = stage.join if isinstance(stage, JoinSide) else stage
            if id(target) in seen:
                continue
            seen.add(id(target))
            if isinstance(target, Clock):
                root.clocks.append(target)
                if type(target).after is not Clock.after:
                    root.after_clocks.append(target)
                self._feeding.setdefault(id(target), []).append(root)
            if not isinstance(target, KeyBySend):
                todo.extend(target.children)

    # ------------------------------------------------------------------ running
    def position_id(self) -> str:
        """A deterministic id of the record being processed (its input and place in it), unique in the job.

        The partition is part of it, as every task reads the same offsets.
        """
        env = self.envelope
        self._seq += 1
        return f"{env.stream}:{env.partition}:{env.offset}:{self._seq - 1}"

    def sequence(self) -> int:
        """A lineage sequence number, increasing within the task's input partition."""
        self._seq += 1
        offset: int = self.envelope.offset
        return offset * (1 << 20) + self._seq - 1

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Hand the record to the roots of its topic."""
        self.collector = collector
        self.envelope = envelope
        self._seq = 0
        roots = self.roots[envelope.stream]
        control = control_of(envelope)
        if control is not None:
            for root in roots:
                root.control(envelope, control.kind, control.source, control.watermark)
            return
        for root in roots:
            root.receive(envelope)

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Periodic work of every stage: key_by progress, closed windows, expired joins."""
        self.collector = collector
        for sender in self._senders.values():
            sender.tick()
        for stage in self._stages.values():
            stage.tick()

    def close(self) -> None:
        """Nothing to release: the stores belong to the container."""

"""From a pipeline's stage graph to a plan on samzapy's task model.

A pipeline is one job. Its *sub-topologies* start at the topics a task reads: the sources
(``app.stream``, ``app.table``) and one intermediate topic per ``key_by`` (records re-keyed by
a task go to ``<job>-<name>``, partitioned by their new key, and come back to the task of that
partition, as Samza's ``partitionBy`` does). Every stateful stage gets stores named from the
user's ``name=`` or a stable scheme (``<stream>-<kind>``, the stream being the topic or
``key_by`` it reads from; a second stage of the same kind there gets ``-2``...), each with a
changelog ``<job>-<store>-changelog``. :meth:`Plan.properties` renders the job configuration,
each key located at the user's line of the stage it comes from, so the one validation pass
(:func:`samzapy.config.parse_job_config`) names that line.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from samzapy.config.properties import Property
from samzapy.pipeline.api import App, Node, PipelineError, Where
from samzapy.pipeline.serde_objects import registry_entries

#: The generic task every pipeline runs (one instance per partition).
TASK_CLASS = "samzapy.pipeline.task:PipelineTask"
#: Application keys the generic task reads (outside samzapy's reserved prefixes).
APP_KEY = "pipeline.app"
TASKS_KEY = "pipeline.tasks"

_STATEFUL = {
    "key_by",
    "window",
    "stream_table_join",
    "stream_stream_join",
    "dedup",
    "table",
    "global_table",
    "fk_join",
    "table_table_join",
}


@dataclass(frozen=True)
class StoreDecl:
    """A store of the plan: name, serdes (``None``: bytes), changelog, side input, owner."""

    name: str
    node: int
    where: Where
    role: str
    key_serde: str | None = None
    value_serde: str | None = None
    changelog: str | None = None
    side_input: str | None = None
    versioned_ms: int | None = None


@dataclass
class Plan:
    """A compiled pipeline: its topics, stores and the nodes' names (see the module)."""

    app: App
    names: dict[int, str]
    sources: dict[str, Node]
    intermediates: dict[int, str]
    outputs: dict[str, Node]
    stores: dict[str, StoreDecl]
    stores_of: dict[int, list[str]]
    children: dict[int, list[Node]]
    timers: bool
    side_inputs: dict[str, Node] = field(default_factory=dict)
    #: The two intermediate topics of each foreign-key join: (subscriptions, responses).
    fk_topics: dict[int, tuple[str, str]] = field(default_factory=dict)

    @property
    def job_name(self) -> str:
        """The job's name (the app's)."""
        return self.app.name

    @property
    def intermediate_topics(self) -> list[str]:
        """Every topic the job writes and reads itself (key_by, foreign-key joins)."""
        return [*self.intermediates.values(), *(t for pair in self.fk_topics.values() for t in pair)]

    @property
    def inputs(self) -> list[str]:
        """Every topic the tasks read: sources, then intermediate topics."""
        return [*self.sources, *self.intermediate_topics]

    def input_of(self, node: Node) -> str:
        """The topic a root node (source, table, key_by) is read from."""
        if node.kind == "key_by":
            return self.intermediates[node.id]
        topic: str = node.args["topic"]
        return topic

    def properties(self, source_name: str, app_spec: str | None = None) -> list[Property]:
        """The job configuration of the plan, each key at the user's line that caused it."""
        return render(self, source_name, app_spec)

    def signature(self) -> dict[str, Any]:
        """What existing state depends on.

        Every stateful stage in order (kind, name, its stores, key and value serdes), the
        intermediate topics and their key serdes. A run is refused when this changes in a way
        that orphans or misreads state (:mod:`samzapy.pipeline.plan_check`).
        """
        steps = []
        for node in self.app.nodes:
            if node.kind not in _STATEFUL:
                continue
            step: dict[str, Any] = {"kind": node.kind, "name": self.names[node.id], "at": str(node.where)}
            step["stores"] = self.stores_of.get(node.id, [])
            step["key"] = node.key_serde
            step["value"] = node.value_serde
            if node.kind == "window":
                step["window"] = repr(node.args["spec"])
                step["aggregation"] = node.args["aggregation"].kind
            if node.kind == "key_by":
                step["topic"] = self.intermediates[node.id]
                step["key_fn"] = code_digest(node.args["fn"])
            if node.kind == "table":
                if any(c.kind == "table_table_join" for c in self.children[node.id]):
                    step["layout"] = "offset-entries"  # the join's {"offset", "value"} entries
                if node.args.get("map_values") is not None:
                    step["value_fn"] = code_digest(node.args["map_values"])
            steps.append(step)
        return {"job": self.job_name, "steps": steps}


def code_digest(fn: Any) -> str | None:
    """A digest of a function's code (bytecode, constants, names).

    A changed key function of a ``key_by`` moves keys to other tasks, so the plan check compares
    it.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    raw = code.co_code + repr((code.co_consts, code.co_names)).encode()
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def compile_app(app: App) -> Plan:
    """Compile ``app`` (see the module); raises :class:`PipelineError` at the user's line."""
    if not app.nodes:
        msg = f"{app.where}: the app '{app.name}' has no streams: add app.stream(topic)...to(topic)"
        raise PipelineError(msg)
    names = _names(app)
    children: dict[int, list[Node]] = {n.id: [] for n in app.nodes}
    for node in app.nodes:
        for parent in node.parents:
            children[parent.id].append(node)
    sources = {n.args["topic"]: n for n in app.nodes if n.kind in ("source", "table")}
    side = {n.args["topic"]: n for n in app.nodes if n.kind == "global_table"}
    intermediates = {n.id: f"{app.name}-{names[n.id]}" for n in app.nodes if n.kind == "key_by"}
    outputs = {n.args["topic"]: n for n in app.nodes if n.kind == "to"}
    _check_topics(app, sources, side, intermediates, outputs)
    stores: dict[str, StoreDecl] = {}
    stores_of: dict[int, list[str]] = {}
    for node in app.nodes:
        if node.kind == "table" and _kept_by_fk_join(children[node.id]):
            continue  # the foreign-key join keeps the table in its own stores
        for decl in _stores(app, node, names[node.id]):
            if decl.name in stores:
                other = stores[decl.name]
                msg = (
                    f"{node.where}: store name '{decl.name}' is already used by the stage at "
                    f"{other.where}: give one of them another name="
                )
                raise PipelineError(msg)
            stores[decl.name] = decl
            stores_of.setdefault(node.id, []).append(decl.name)
    for node in app.nodes:
        if node.kind == "source" and not children[node.id]:
            topic = node.args["topic"]
            msg = f"{node.where}: the stream of '{topic}' goes nowhere: add .to(topic) or .sink(fn)"
            raise PipelineError(msg)
    timers = any(n.kind in ("key_by", "window", "stream_stream_join") for n in app.nodes)
    fk_topics = {
        n.id: (f"{app.name}-{names[n.id]}-subscriptions", f"{app.name}-{names[n.id]}-responses")
        for n in app.nodes
        if n.kind == "fk_join"
    }
    _check_table_writers(app)
    return Plan(
        app, names, sources, intermediates, outputs, stores, stores_of, children, timers, side, fk_topics
    )


def _kept_by_fk_join(children: list[Node]) -> bool:
    """Whether a table's only readers are foreign-key joins (which keep it themselves)."""
    return bool(children) and all(c.kind == "fk_join" for c in children)


def _check_table_writers(app: App) -> None:
    """A table takes part in at most one table-table or foreign-key join (the join keeps it)."""
    seen: dict[int, Node] = {}
    for node in app.nodes:
        if node.kind not in ("table_table_join", "fk_join"):
            continue
        for parent in node.parents:
            if parent.kind != "table":
                msg = (
                    f"{node.where}: a join of a joined table is not offered yet: join tables read from topics"
                )
                raise PipelineError(msg)
            if parent.id in seen:
                msg = (
                    f"{node.where}: the table of '{parent.args['topic']}' is already joined with a table "
                    f"at {seen[parent.id].where}: a table takes part in one table join (read the topic twice)"
                )
                raise PipelineError(msg)
            seen[parent.id] = node


def _names(app: App) -> dict[int, str]:
    """Each node's name: the user's, else ``<stream>-<kind>`` (``-2``, ``-3`` when repeated)."""
    names: dict[int, str] = {}
    used: dict[str, Node] = {}
    for node in app.nodes:
        if node.name is not None:
            base = node.name
        elif node.kind in _STATEFUL or node.kind in ("table_table_join",):
            base = f"{_root_name(node, names)}-{_KIND_NAMES.get(node.kind, node.kind)}"
        else:
            names[node.id] = f"{node.kind}-{node.id}"
            continue
        name, n = base, 1
        while name in used:
            if node.name is not None and used[name].name == node.name:
                msg = f"{node.where}: name '{name}' is already the name of the stage at {used[name].where}"
                raise PipelineError(msg)
            n += 1
            name = f"{base}-{n}"
        used[name] = node
        names[node.id] = name
    return names


_KIND_NAMES = {
    "key_by": "repartition",
    "stream_table_join": "join",
    "stream_stream_join": "join",
    "table_table_join": "join",
    "fk_join": "fk-join",
}


def _root_name(node: Node, names: dict[int, str]) -> str:
    """The name of the source or key_by the node reads from (first parent chain)."""
    current = node.parents[0] if node.parents else node
    while current.kind not in ("source", "table", "key_by") and current.parents:
        current = current.parents[0]
    if current.kind == "key_by":
        return names[current.id]
    return str(current.args.get("topic", current.kind))


def _check_topics(
    app: App,
    sources: dict[str, Node],
    side: dict[str, Node],
    intermediates: dict[int, str],
    outputs: dict[str, Node],
) -> None:
    for topic, node in outputs.items():
        if topic in sources or topic in intermediates.values():
            msg = (
                f"{node.where}: to('{topic}') writes a topic this job reads: that would feed its "
                "own output back; write to another topic"
            )
            raise PipelineError(msg)
    for topic, node in side.items():
        if topic in sources:
            msg = f"{node.where}: '{topic}' is read both as a global table and as a stream or table"
            raise PipelineError(msg)


def _changelog(app: App, store: str) -> str:
    return f"{app.name}-{store}-changelog"


def _stores(app: App, node: Node, name: str) -> list[StoreDecl]:
    """The stores a node needs."""
    kind, where = node.kind, node.where

    def decl(store: str, role: str, **kw: Any) -> StoreDecl:
        return StoreDecl(store, node.id, where, role, changelog=_changelog(app, store), **kw)

    if kind in ("key_by", "window", "dedup"):
        return [decl(name, kind)]
    if kind == "table":
        versioned = node.args.get("versioned")
        if versioned is not None:
            return [decl(name, "versioned-table", versioned_ms=versioned)]
        return [decl(name, "table", key_serde=node.key_serde, value_serde=node.value_serde)]
    if kind == "global_table":
        return [
            StoreDecl(
                name,
                node.id,
                where,
                "global-table",
                node.key_serde,
                node.value_serde,
                side_input=node.args["topic"],
            )
        ]
    if kind == "stream_table_join" and node.args["event_time"]:
        return [decl(name, "join-buffer")]
    if kind == "stream_stream_join":
        # the same four names (and bytes serdes) in both store layouts of the join: -expiry holds
        # layout 2's pending index and marker (layout 1's expiry index), -time the event time
        # (and layout 1's registry); so a recorded plan accepts a switch (stream_join_stage)
        return [decl(f"{name}-{part}", f"join-{part}") for part in ("left", "right", "expiry", "time")]
    if kind == "fk_join":
        left, right = node.parents
        return [
            decl(f"{name}-left", "fk-left", key_serde=left.key_serde, value_serde="json"),
            decl(f"{name}-right", "fk-right", key_serde=right.key_serde, value_serde="json"),
            decl(f"{name}-subscriptions", "fk-subscriptions"),
            decl(f"{name}-joined", "joined", key_serde=left.key_serde, value_serde="json"),
        ]
    if kind == "table_table_join":
        left = node.parents[0]
        return [decl(f"{name}-joined", "joined", key_serde=left.key_serde, value_serde="json")]
    if kind == "process":
        return [
            decl(spec.name, "process", key_serde=spec.key, value_serde=spec.value)
            for spec in node.args["stores"]
        ]
    return []


def render(plan: Plan, source_name: str, app_spec: str | None) -> list[Property]:
    """The job's properties (see :meth:`Plan.properties`)."""
    app = plan.app
    props: list[Property] = []

    def put(key: str, value: Any, where: Where | None = None) -> None:
        at = where or app.where
        props.append(Property(key, str(value), at.file, at.line))

    put("job.name", app.name)
    put("task.class", TASK_CLASS)
    put("task.inputs", ",".join(f"kafka.{t}" for t in plan.inputs))
    if plan.timers:
        put("task.window.ms", 1000)
    # Only the consumer's: the producer takes it unless set, so one --config changes both.
    put("systems.kafka.consumer.bootstrap.servers", app.broker)
    put("systems.kafka.samza.key.serde", "string")
    put("systems.kafka.samza.msg.serde", "json")
    put("systems.kafka.samza.offset.default", "oldest")
    for topic, node in plan.sources.items():
        _stream_serdes(put, topic, node.key_serde or "bytes", node.value_serde or "bytes", node.where)
        if node.kind == "table" and node.args.get("bootstrap"):
            put(f"systems.kafka.streams.{topic}.samza.bootstrap", "true", node.where)
            put(f"systems.kafka.streams.{topic}.samza.priority", 1, node.where)
    for node_id, topic in plan.intermediates.items():
        node = app.nodes[node_id]
        _stream_serdes(put, topic, node.key_serde or "string", node.value_serde or "json", node.where)
        _intermediate(put, topic, app, node.where)
    for node_id, (subscriptions, responses) in plan.fk_topics.items():
        node = app.nodes[node_id]
        left, right = node.parents
        _stream_serdes(put, subscriptions, right.key_serde or "string", "json", node.where)
        _stream_serdes(put, responses, left.key_serde or "string", "json", node.where)
        _intermediate(put, subscriptions, app, node.where)
        _intermediate(put, responses, app, node.where)
    for topic, node in plan.outputs.items():
        _stream_serdes(
            put, topic, node.args["key_serde"] or "string", node.args["value_serde"] or "json", node.where
        )
    for node in app.nodes:
        if node.kind == "window" and node.args["late_to"]:
            parent = node.parents[0]
            _stream_serdes(
                put,
                node.args["late_to"],
                parent.key_serde or "string",
                parent.value_serde or "json",
                node.where,
            )
    for topic, node in plan.side_inputs.items():
        _stream_serdes(put, topic, node.key_serde or "string", node.value_serde or "json", node.where)
    for store in plan.stores.values():
        prefix = f"stores.{store.name}."
        put(prefix + "factory", "rocksdb", store.where)
        if store.changelog:
            put(prefix + "changelog", f"kafka.{store.changelog}", store.where)
        if store.key_serde:
            put(prefix + "key.serde", store.key_serde, store.where)
        if store.value_serde:
            put(prefix + "msg.serde", store.value_serde, store.where)
        if store.side_input:
            put(prefix + "side.inputs", f"kafka.{store.side_input}", store.where)
            put(prefix + "side.inputs.scope", "global", store.where)
        if store.versioned_ms is not None:
            put(prefix + "versioned.history.ms", store.versioned_ms, store.where)
    _serde_registry(props)
    for key, value in app.config.items():
        put(key, value)
    put(APP_KEY, app_spec or source_name)
    if app.partitions:
        put(TASKS_KEY, app.partitions)
    return props


def _serde_registry(props: list[Property]) -> None:
    """Add the registry entry of each serde given as a class or object.

    See :mod:`samzapy.pipeline.serde_objects`; each is located at the first stage that uses it.
    """
    first: dict[str, Property] = {}
    for prop in props:
        if prop.key.endswith((".key.serde", ".msg.serde")):
            first.setdefault(prop.value, prop)
    for key, spec in registry_entries(set(first)):
        at = first[key.split(".")[2]]
        props.append(Property(key, spec, at.source, at.line))


def _intermediate(put: Any, topic: str, app: App, where: Where) -> None:
    put(f"systems.kafka.streams.{topic}.samza.intermediate", "true", where)
    if app.partitions:
        put(f"systems.kafka.streams.{topic}.partitions", app.partitions, where)


def _stream_serdes(put: Any, topic: str, key: str, value: str, where: Where) -> None:
    if key != "string":
        put(f"systems.kafka.streams.{topic}.samza.key.serde", key, where)
    if value != "json":
        put(f"systems.kafka.streams.{topic}.samza.msg.serde", value, where)

"""``samzapy describe app.py``: a pipeline's plan as text.

Its stages at the user's lines, the topics it reads, writes and creates, its stores, and the
equivalent job configuration.
"""

from __future__ import annotations

from typing import Any

from samzapy.pipeline.api import Node
from samzapy.pipeline.compiler import Plan


def describe(plan: Plan, properties: list[Any]) -> str:
    """The text ``samzapy describe`` prints (see the module)."""
    lines = [f"pipeline {plan.job_name}", "", "stages:"]
    for node in plan.app.nodes:
        lines.append(f"  {node.where!s:<18} {node.kind:<18} {_detail(plan, node)}")
    changelogs = [s.changelog for s in plan.stores.values() if s.changelog]
    lines += [
        "",
        "topics read:",
        *(f"  {t}" for t in plan.sources),
        *(f"  {t} (global table)" for t in plan.side_inputs),
        "topics written:",
        *(f"  {t}" for t in plan.outputs),
        *(
            f"  {n.args['late_to']} (late records)"
            for n in plan.app.nodes
            if n.kind == "window" and n.args["late_to"]
        ),
        "topics created:",
        *(f"  {t} (intermediate: written and read by the job)" for t in plan.intermediate_topics),
        *(f"  {t} (changelog, compacted)" for t in changelogs),
        "stores:",
    ]
    for store in plan.stores.values():
        serdes = f"{store.key_serde or 'bytes'}/{store.value_serde or 'bytes'}"
        lines.append(f"  {store.name:<30} {store.role:<16} {serdes:<14} {store.where}")
    lines += ["", "job configuration:"]
    lines += [f"  {p.key}={p.value}" for p in properties]
    return "\n".join(lines) + "\n"


def _detail(plan: Plan, node: Node) -> str:
    args, name = node.args, plan.names[node.id]
    kind = node.kind
    if kind in ("source", "table", "global_table"):
        extra = f" versioned {args['versioned']} ms" if args.get("versioned") else ""
        if args.get("map_values") is not None:
            extra += f" map_values {_fn(args['map_values'])}"
        if args.get("bootstrap"):
            extra += " bootstrap"
        return f"{args['topic']} (key {node.key_serde}, value {node.value_serde}){extra}"
    if kind == "key_by":
        return f"{name} -> topic {plan.intermediates[node.id]} by {_fn(args['fn'])}"
    if kind == "window":
        agg = args["aggregation"].kind
        return f"{name}: {args['spec']!r} {agg}, grace {args['grace']} ms, emit {args['emit']}"
    if kind == "to":
        topic: str = args["topic"]
        return topic
    if kind == "fk_join":
        subscriptions, responses = plan.fk_topics[node.id]
        return f"{name}: {args['kind']} by {_fn(args['foreign_key'])} via {subscriptions}, {responses}"
    if kind in ("stream_table_join", "stream_stream_join", "table_table_join", "dedup"):
        return f"{name}: {args.get('kind', '')} {_fn(args.get('joiner') or args.get('fn'))}".rstrip()
    fn = args.get("fn")
    return _fn(fn) if fn is not None else ""


def _fn(fn: Any) -> str:
    from samzapy.pipeline.api import function_where

    return f"{getattr(fn, '__qualname__', repr(fn))} ({function_where(fn)})"


def properties_text(properties: list[Any]) -> str:
    r"""The job configuration as a ``.properties`` file, with where each key came from as a comment.

    ``=``, ``:``, ``#``, ``!``, ``\`` and leading spaces are escaped.

    >>> from samzapy.config.properties import Property
    >>> print(properties_text([Property("job.name", "a=b", "app.py", 3)]), end="")
    # app.py:3
    job.name=a\=b
    """
    lines = []
    for prop in properties:
        lines.append(f"# {prop.location}")
        lines.append(f"{prop.key}={_escape(prop.value)}")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    out = value.replace("\\", "\\\\")
    for ch in "=:#!":
        out = out.replace(ch, "\\" + ch)
    if out.startswith(" "):
        out = "\\" + out
    return out.replace("\n", "\\n")

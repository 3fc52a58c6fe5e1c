"""Where the stream join's latency goes: a tracer for the job process and its analysis.

``python -m benchmarks.join_trace TRACE.json run job.properties ...`` runs ``samzapy`` with
the run loop's steps timed (wall-clock ms, comparable with Kafka record timestamps) and
garbage-collector pauses recorded; the timeline is written to ``TRACE.json`` when the job
exits. Only the benchmark uses it (``bench_stream_join --trace``): it wraps methods from the
outside, so the runtime carries no tracing code.

:func:`breakdown` splits each joined record's latency (its append time minus the append time
of the later of its two inputs) into: the loop busy elsewhere before it polled (by what it was
doing: commit phase, window, processing, other), the poll's wait for the fetch, and the time
from the poll's return to the output (the batch before it). Times are from one host's clock.
"""

from __future__ import annotations

import atexit
import bisect
import functools
import gc
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

#: (name, start ms, end ms, detail)
Span = tuple[str, float, float, Any]

_spans: list[Span] = []
_polls: list[tuple[float, float, list[tuple[str, int, int, int]]]] = []


def _now_ms() -> float:
    return time.time() * 1000.0


def _timed(owner: Any, attribute: str, name: str) -> None:
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _now_ms()
        try:
            return original(*args, **kwargs)
        finally:
            _spans.append((name, start, _now_ms(), None))

    setattr(owner, attribute, wrapper)


def _trace_polls() -> None:
    from samzapy.container.inputs import Inputs

    original = Inputs.poll

    @functools.wraps(original)
    def poll(self: Any, timeout_ms: int, max_records: int) -> Any:
        start = _now_ms()
        batches = original(self, timeout_ms, max_records)
        got = [(p.tp.topic, p.tp.partition, r[0].offset, r[-1].offset) for p, r in batches if r]
        _polls.append((start, _now_ms(), got))
        return batches

    Inputs.poll = poll  # type: ignore[method-assign]


def _trace_gc() -> None:
    started: dict[str, float] = {}

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["t"] = _now_ms()
        elif "t" in started:
            _spans.append((f"gc{info['generation']}", started.pop("t"), _now_ms(), info.get("collected")))

    gc.callbacks.append(callback)


def install(path: Path) -> None:
    """Time the run loop's steps and GC pauses; write the timeline to ``path`` at exit."""
    from samzapy.checkpoint import CheckpointWriter
    from samzapy.container import commit as commit_module
    from samzapy.container.fencing import Fence
    from samzapy.container.head_flush import HeadFlusher
    from samzapy.container.run_loop import Container
    from samzapy.container.task_instance import TaskInstance
    from samzapy.kafka.producer import Producer

    _trace_polls()
    _trace_gc()
    if os.environ.get("JOIN_TRACE_GC_FREEZE") == "1":  # experiment: start-up objects out of GC scans
        start = Container._start

        def frozen_start(self: Any) -> None:
            start(self)
            gc.freeze()

        Container._start = frozen_start  # type: ignore[method-assign]
    for owner, attribute, name in (
        (Container, "_commit", "commit"),
        (Fence, "lost", "commit.fence"),
        (TaskInstance, "flush_stores", "commit.flush_stores"),
        (Producer, "flush", "producer.flush"),
        (commit_module, "take_local_checkpoints", "commit.local_checkpoints"),
        (HeadFlusher, "after_poll", "flush_at_head"),
        (CheckpointWriter, "write", "commit.checkpoint_write"),
        (Container, "_write_metrics", "write_metrics"),
        (TaskInstance, "window", "window"),
        (TaskInstance, "process_records", "process"),
    ):
        _timed(owner, attribute, name)

    def dump() -> None:
        path.write_text(json.dumps({"spans": _spans, "polls": _polls}))

    atexit.register(dump)


# ------------------------------------------------------------------------- analysis
def _poll_index(polls: list[list[Any]]) -> dict[tuple[str, int], list[tuple[int, int, float, float]]]:
    by_tp: dict[tuple[str, int], list[tuple[int, int, float, float]]] = defaultdict(list)
    for start, end, got in polls:
        for topic, partition, first, last in got:
            by_tp[(topic, partition)].append((first, last, start, end))
    for entries in by_tp.values():
        entries.sort()
    return by_tp


def _find_poll(index: dict, topic: str, partition: int, offset: int) -> tuple[float, float] | None:
    entries = index.get((topic, partition), [])
    at = bisect.bisect_right(entries, (offset, float("inf"))) - 1
    if at >= 0 and entries[at][0] <= offset <= entries[at][1]:
        return entries[at][2], entries[at][3]
    return None


#: Later entries win where steps nest: a commit's phases over the commit, GC over all.
_PRIORITY = (
    "poll",
    "process",
    "flush_at_head",
    "write_metrics",
    "window",
    "commit",
    "commit.fence",
    "commit.flush_stores",
    "commit.local_checkpoints",
    "commit.checkpoint_write",
    "producer.flush",
    "gc",
)


class Timeline:
    """What the loop was doing at each millisecond of the run (the innermost traced step)."""

    def __init__(self, spans: list[Span], polls: list[list[Any]]) -> None:
        starts = [s[1] for s in spans] + [p[0] for p in polls]
        self.origin = int(min(starts)) if starts else 0
        ends = [s[2] for s in spans] + [p[1] for p in polls]
        self.labels: list[str] = ["other"] * (int(max(ends, default=0)) - self.origin + 2)
        named = [("poll", p[0], p[1]) for p in polls] + [
            ("gc" if s[0].startswith("gc") else s[0], s[1], s[2]) for s in spans
        ]
        rank = {name: n for n, name in enumerate(_PRIORITY)}
        named.sort(key=lambda item: rank.get(item[0], 0))
        for name, start, end in named:
            first, last = int(start) - self.origin, int(end) - self.origin
            self.labels[first : last + 1] = [name] * (last - first + 1)

    def count(self, start: float, end: float, into: dict[str, float]) -> None:
        """Add, per step, how many milliseconds of [start, end) the loop spent in it."""
        first = max(0, int(start) - self.origin)
        last = min(len(self.labels), int(end) - self.origin)
        for label in self.labels[first:last]:
            into[label] += 1.0


def breakdown(
    trace: dict[str, Any],
    joins: list[tuple[float, float, str, int, int]],
    top: float = 0.95,
) -> list[str]:
    """Lines describing the latency of the joins at or above the ``top`` quantile.

    ``joins``: per joined record, (output append ms, trigger append ms, trigger topic,
    partition, offset), the trigger being the later of its two inputs.
    """
    spans: list[Span] = [tuple(s) for s in trace["spans"]]  # type: ignore[misc]
    timeline = Timeline(spans, trace["polls"])
    index = _poll_index(trace["polls"])
    latencies = sorted(out - trig for out, trig, *_ in joins)
    if not latencies:
        return ["no joins"]
    cut = latencies[min(len(latencies) - 1, int(top * len(latencies)))]
    tail = [j for j in joins if j[0] - j[1] >= cut]
    parts: dict[str, float] = defaultdict(float)
    during: dict[str, float] = defaultdict(float)
    before_poll: dict[str, float] = defaultdict(float)
    unfound = 0
    for out, trig, topic, partition, offset in tail:
        found = _find_poll(index, topic, partition, offset)
        if found is None:
            unfound += 1
            continue
        poll_start, poll_end = found
        parts["loop busy before its poll"] += max(0.0, poll_start - trig)
        parts["in its poll (fetch wait)"] += poll_end - max(trig, poll_start)
        parts["poll return -> output"] += out - poll_end
        timeline.count(trig, out, during)
        timeline.count(trig, poll_start, before_poll)
    n = max(1, len(tail) - unfound)
    lines = [
        f"tail: {len(tail)} joins with latency >= {cut:.0f} ms (p{top * 100:.0f}), "
        f"mean {sum(j[0] - j[1] for j in tail) / max(1, len(tail)):.0f} ms; {unfound} not found in a poll"
    ]
    lines += [f"  mean {name}: {total / n:.1f} ms" for name, total in parts.items()]
    lines.append("  where the loop was during a tail join's latency (mean ms; before its poll):")
    lines += [
        f"    {name:<26} {total / n:>7.1f}  {before_poll.get(name, 0.0) / n:>7.1f}"
        for name, total in sorted(during.items(), key=lambda kv: -kv[1])
    ]
    lines += _span_summary(spans)
    return lines


def _span_summary(spans: list[Span]) -> list[str]:
    by_name: dict[str, list[float]] = defaultdict(list)
    for name, start, end, _ in spans:
        by_name[name].append(end - start)
    lines = ["steps (count, mean, p99, max ms):"]
    for name in sorted(by_name):
        values = sorted(by_name[name])
        p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
        lines.append(
            f"  {name:<28} {len(values):>6} {sum(values) / len(values):>8.2f} {p99:>8.1f} {values[-1]:>8.1f}"
        )
    return lines


def main(argv: list[str]) -> None:
    """``join_trace TRACE.json <samzapy arguments>``: run samzapy traced."""
    install(Path(argv[0]))
    sys.argv = ["samzapy", *argv[1:]]
    from samzapy.cli import main as samzapy_main

    samzapy_main()


if __name__ == "__main__":
    main(sys.argv[1:])

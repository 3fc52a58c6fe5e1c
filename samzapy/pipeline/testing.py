"""Running a pipeline in-process in a test: every task of the job over one in-memory broker.

:class:`PipelineHarness` compiles the app, and runs one :class:`samzapy.testing.TaskHarness`
(the real runtime: task instance, stores, changelogs, commit, restore) per partition over a
shared :class:`samzapy.testing.MemoryBroker`. Inputs go to the partition of their key (Kafka's
partitioner); what a task writes to an intermediate topic is processed by the task of that
partition, until nothing is left. Outputs and stores are read back decoded.

Examples:
    >>> import samzapy
    >>> from samzapy.pipeline.testing import PipelineHarness
    >>> app = samzapy.App("doc-demo")
    >>> _ = app.stream("words").map(str.upper).to("upper")
    >>> with PipelineHarness(app, partitions=2) as h:
    ...     h.send_all("words", [("a", "x"), ("b", "y")])
    ...     sorted(h.outputs("upper"))
    [('a', 'X'), ('b', 'Y')]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samzapy.config.properties import Config
from samzapy.kafka.partitioner import partition_for_key
from samzapy.operators.event_time import CONTROL_HEADER, END_OF_STREAM, WATERMARK
from samzapy.pipeline.api import App
from samzapy.pipeline.compiler import TASKS_KEY
from samzapy.pipeline.serde_check import check_serde_names
from samzapy.pipeline.task import PipelineTask
from samzapy.streams import SystemStream
from samzapy.testing import HarnessError, MemoryBroker, TaskHarness, distinct_by_id


class PipelineHarness:
    """Every task of a pipeline in-process (see the module).

    Args:
        app: the pipeline.
        partitions: the partition count of every topic (inputs, intermediate topics,
            outputs, changelogs): the job's task count.
        config: extra job properties (e.g. ``{"task.commit.ms": 1000}``).
    """

    def __init__(self, app: App, *, partitions: int = 1, config: dict[str, Any] | None = None) -> None:
        self.app = app
        self.plan = app.plan()
        self.partitions = partitions
        entries = self.plan.properties("<test>", "<harness>")
        extra = {f"systems.kafka.streams.{t}.partitions": partitions for t in self.plan.intermediate_topics}
        extra[TASKS_KEY] = partitions
        self.config = Config(entries).with_overrides({**extra, **(config or {})})
        check_serde_names(self.config)  # a bad name once, at the stage that wrote it
        self.broker = MemoryBroker(default_partitions=partitions)
        #: The harness's wall clock in ms (what the tasks' harnesses start from too).
        self.wall_clock_ms = 0
        clock = staticmethod(lambda: self.wall_clock_ms / 1000)
        task_class = type(f"PipelineTask_{app.name}", (PipelineTask,), {"plan": self.plan, "clock": clock})
        self.tasks = [
            TaskHarness(task_class, self.config, partition=p, broker=self.broker, loopback=True)
            for p in range(partitions)
        ]
        self._serdes = self.tasks[0].serdes

    def __enter__(self) -> PipelineHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ input
    def send(
        self,
        topic: str,
        key: Any,
        value: Any,
        *,
        timestamp: int = 0,
        partition: int | None = None,
        run: bool = True,
    ) -> None:
        """Append one record to ``topic`` (the partition of its key unless given) and run.

        ``run=False``: it waits, with what else is sent so, for :meth:`run`.
        """
        self._append(topic, key, value, timestamp=timestamp, partition=partition)
        if run:
            self.run()

    def send_all(
        self, topic: str, records: Iterable[Any], *, timestamp: Any = None, run: bool = True
    ) -> None:
        """Append records (``(key, value)`` pairs, or ``(key, value, timestamp)``) in order, then run.

        ``timestamp`` may be a function of the value.

        ``run=False`` leaves them waiting: records of several topics sent so, then :meth:`run`,
        are a backlog, which each task takes as a job takes one (``task.input.order``: by
        record timestamp by default, :class:`samzapy.testing.run.DeliveryOrder`).
        """
        for record in records:
            key, value, *rest = record
            ts = rest[0] if rest else (timestamp(value) if callable(timestamp) else timestamp or 0)
            self._append(topic, key, value, timestamp=ts, partition=None)
        if run:
            self.run()

    def _known(self, what: str, name: str, known: Iterable[str]) -> None:
        """Refuse a topic or store the pipeline does not have (a typo would test nothing).

        ``what`` is the message, ``{name}``, ``{app}`` and ``{known}`` filled in.
        """
        names = list(known)
        if name not in names:
            known_text = ", ".join(names) or "none"
            raise HarnessError(what.format(name=repr(name), app=repr(self.plan.app.name), known=known_text))

    def _append(self, topic: str, key: Any, value: Any, *, timestamp: int, partition: int | None) -> None:
        self._known(_NOT_AN_INPUT, topic, self._inputs())
        table = self.plan.side_inputs.get(topic)
        if table is not None:  # a global table: every task's copy takes it, as side inputs do
            name = self.plan.stores_of[table.id][0]
            for h in self.tasks:
                h.stores[name].put(key, value)
        stream = SystemStream("kafka", topic)
        key_serde, msg_serde = self._serdes.for_stream(stream)
        raw_key = key if key_serde is None or key is None else key_serde.to_bytes(key)
        raw = value if msg_serde is None or value is None else msg_serde.to_bytes(value)
        if partition is None:
            partition = partition_for_key(raw_key, self.partitions) if isinstance(raw_key, bytes) else 0
        self.broker.append(topic, partition, raw_key, raw, timestamp=timestamp)

    def end_of_stream(self, topic: str | None = None) -> None:
        """An end-of-stream control record in every partition of ``topic`` (default: every source), then run.

        Event-time stages close what they hold.
        """
        self._control(topic, END_OF_STREAM, {"control": "end-of-stream"})

    def advance_event_time(self, time_ms: int, topic: str | None = None) -> None:
        """A watermark control record (event time reached ``time_ms``) in every partition of ``topic``.

        ``topic`` defaults to every source; then run.
        """
        self._control(topic, WATERMARK, {"control": "watermark", "watermark": time_ms})

    def _written(self) -> list[str]:
        late = [n.args["late_to"] for n in self.plan.app.nodes if n.kind == "window" and n.args["late_to"]]
        return [*self.plan.outputs, *late]

    def _inputs(self) -> list[str]:
        return [*self.plan.inputs, *(t for t in self.plan.side_inputs if t not in self.plan.inputs)]

    def _control(self, topic: str | None, kind: bytes, body: dict[str, Any]) -> None:
        if topic is not None:
            self._known(_NOT_AN_INPUT, topic, self._inputs())
        for name in [topic] if topic else list(self.plan.sources):
            _, msg_serde = self._serdes.for_stream(SystemStream("kafka", name))
            raw = msg_serde.to_bytes(body) if msg_serde is not None else body
            for p in range(self.partitions):
                # stamped "now", as a producer does: after the records sent before it
                now = self.broker.now()
                self.broker.append(name, p, None, raw, headers=[(CONTROL_HEADER, kind)], timestamp=now)
        self.run()

    # ------------------------------------------------------------------ running
    def run(self) -> int:
        """Process what every running task has not processed yet, until nothing is left.

        Each task takes the records waiting in its inputs in the job's order
        (``task.input.order``; by default the timestamp order a job takes a backlog in, the
        Spark replay's), so a run over records sent with ``run=False`` equals a job's run
        over that history.
        """
        total = 0
        while True:
            done = sum(h.process_available() for h in self.tasks)
            total += done
            if not done:
                return total

    def window(self) -> None:
        """Every running task's ``window()`` once, then :meth:`run`.

        A task's re-keyed records and broadcast progress reach the others.
        """
        for h in self.tasks:
            if h.state == "running":
                h.window()
        self.run()

    def advance_wall_clock(self, ms: int) -> None:
        """Move every task's wall clock on by ``ms``, then run.

        Each task's ``window()`` and commit follow when due, as in
        :meth:`TaskHarness.advance_wall_clock`.
        """
        self.wall_clock_ms += ms
        for h in self.tasks:
            h.advance_wall_clock(ms)
        self.run()

    def commit(self) -> None:
        """Commit every running task."""
        for h in self.tasks:
            if h.state == "running":
                h.commit()

    def crash(self, partition: int | None = None, **kw: Any) -> None:
        """Crash one task (or all), as ``kill -9`` (:meth:`TaskHarness.crash`)."""
        for h in self.tasks if partition is None else [self.tasks[partition]]:
            if h.state == "running":
                h.crash(**kw)

    def restart(self, partition: int | None = None) -> None:
        """Restart one task (or all).

        Stores restored from their changelogs to the last checkpoint, input read again from it;
        then run.
        """
        for h in self.tasks if partition is None else [self.tasks[partition]]:
            h.restart()
        self.run()

    # ------------------------------------------------------------------ reading back
    def records(self, topic: str) -> list[Any]:
        """The broker's records of ``topic``.

        All partitions, in the order taken; duplicates a restart re-sent are kept.
        """
        return self.broker.records(topic)

    def outputs(self, topic: str) -> list[tuple[Any, Any]]:
        """The (key, value) of each distinct output of ``topic`` (by ``samzapy.id``).

        Decoded with the topic's serdes, in the order the broker took them.
        """
        self._known("{name} is not written by pipeline {app} (it writes: {known})", topic, self._written())
        key_serde, msg_serde = self._serdes.for_stream(SystemStream("kafka", topic))
        kept = distinct_by_id(self.records(topic)).values()
        ordered = sorted(kept, key=lambda r: r.sequence)
        return [(_decode(key_serde, r.key), _decode(msg_serde, r.value)) for r in ordered]

    def store(self, name: str) -> dict[Any, Any]:
        """The contents of store ``name`` over every task, decoded with its serdes."""
        self._known("no store {name} in pipeline {app} (its stores: {known})", name, self.plan.stores)
        found: dict[Any, Any] = {}
        for h in self.tasks:
            with h.stores[name].all() as entries:
                found.update((k, v) for k, v in entries)
        return found

    def close(self) -> None:
        """Close every task harness."""
        for h in self.tasks:
            h.close()


#: A topic a test sends to that no task reads (``_known``'s message).
_NOT_AN_INPUT = "{name} is not an input of pipeline {app} (its inputs: {known})"


def _decode(serde: Any, data: Any) -> Any:
    return data if serde is None or data is None else serde.from_bytes(data)

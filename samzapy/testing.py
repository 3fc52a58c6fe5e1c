"""An in-process harness to test a task without a broker: feed envelopes, read outputs,
inspect stores and their changelogs, and restore the stores from those changelogs into fresh
ones (:meth:`TaskHarness.restore_stores`). :class:`InMemoryChangelog` is the restorable
changelog the harness captures into, also usable on its own under ``build_store``.

Examples:
    >>> from samzapy.testing import TaskHarness
    >>> from samzapy.jobs.pageview_filter import PageViewFilterTask
    >>> serdes = {"systems.kafka.samza.key.serde": "string", "systems.kafka.samza.msg.serde": "json"}
    >>> h = TaskHarness(PageViewFilterTask, {"task.inputs": "kafka.pageviews", **serdes})
    >>> h.send("kafka.pageviews", "/page/1", {"view_id": "v1", "user_id": "u1", "page": "/page/1", "ts": 0})
    >>> [(o.key, o.message["hour"]) for o in h.outputs]
    [('u1', 0)]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from samzapy.config import Config, parse_job_config
from samzapy.container.collector import encode_output
from samzapy.container.task_builder import TaskBuilder
from samzapy.container.task_instance import Coordinator
from samzapy.metrics import MetricsRegistry
from samzapy.output_ids import output_id
from samzapy.serdes import SerdeResolver
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.memory_changelog import InMemoryChangelog
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for
from samzapy.task import IncomingMessageEnvelope, OutgoingMessageEnvelope, WindowableTask

_DEFAULTS = {"job.name": "harness", "task.class": "samzapy.task:StreamTask", "task.inputs": "kafka.input"}


#: The harness's changelogs keep what they are sent and can be restored from (the name
#: earlier versions used for :class:`InMemoryChangelog`).
CollectingChangelog = InMemoryChangelog


class _Collector:
    """Keeps what the task sends, after serialising it with its stream's serdes as a running
    job would (so a misfit fails in the task's ``send()``); ``serialized`` holds the bytes."""

    def __init__(self, task_name: str, serdes: SerdeResolver) -> None:
        self.outputs: list[OutgoingMessageEnvelope] = []
        self.serialized: list[tuple[bytes | None, bytes | None]] = []
        self._serdes = serdes
        self._task_name = task_name
        self._stream = "init"
        self._origin: int | str = 0
        self._sequence = 0

    def begin(self, stream: str, origin: int | str) -> None:
        self._stream, self._origin, self._sequence = stream, origin, 0

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        stream = envelope.system_stream
        assert isinstance(stream, SystemStream)
        key_serde, msg_serde = self._serdes.for_stream(stream)
        key = encode_output(key_serde, envelope.key, stream, "key")
        message = encode_output(msg_serde, envelope.message, stream, "message")
        self.serialized.append((key, message))
        if envelope.id is None:
            envelope.id = output_id(self._task_name, self._stream, self._origin, self._sequence)
            self._sequence += 1
        self.outputs.append(envelope)


class TaskHarness:
    """Runs one task (partition ``partition``) of a job in-process.

    ``config`` is a dict of job properties (job.name, task.inputs... get defaults); the
    task's stores and context are built as the container builds them
    (:class:`~samzapy.container.task_builder.TaskBuilder`: the real store factory, RocksDB in
    a temporary directory unless the config says ``inmemory``), with their changelogs
    collected in :attr:`changelogs`. Store writes and outputs go through the configured
    serdes, as in a running job: a key or value that does not fit fails in the task's own
    ``put()`` or ``send()``, naming the store or stream and the config key that chose the serde.
    """

    def __init__(
        self,
        task: type | Any,
        config: dict[str, str] | Config | None = None,
        *,
        partition: int = 0,
        base_dir: Path | None = None,
    ) -> None:
        raw = config if isinstance(config, Config) else Config.from_dict({**_DEFAULTS, **(config or {})})
        if isinstance(task, str):  # imported once, by the parse, as a run does
            raw = raw.with_overrides({"task.class": task})
        self.config = raw
        self.job = parse_job_config(raw, check_task_class=isinstance(task, str))
        self.partition = partition
        self.task_name = task_name_for(partition)
        self._tmp = None
        if base_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samzapy-harness-")
            base_dir = Path(self._tmp.name)
        self.base_dir = base_dir
        self.registry = MetricsRegistry()
        self.changelogs: dict[str, CollectingChangelog] = {}
        builder = TaskBuilder(
            self.job, base_dir=base_dir, registry=self.registry, changelog_for=self._collect_changelog
        )
        self.serdes = builder.serdes
        self.stores: dict[str, Any] = builder.stores(partition)
        if isinstance(task, type):
            self.task = task()
        elif isinstance(task, str):
            self.task = self.job.task_type()
        else:
            self.task = task
        self.collector = _Collector(self.task_name, self.serdes)
        self.coordinator = Coordinator()
        self.metrics = builder.task_metrics(partition)
        self._offsets: dict[SystemStreamPartition, int] = {}
        builder.init_task(self.task, partition, self.stores)

    def _collect_changelog(self, store_config: Any, partition: int) -> CollectingChangelog:
        changelog = self.changelogs[store_config.name] = CollectingChangelog()
        return changelog

    @property
    def outputs(self) -> list[OutgoingMessageEnvelope]:
        """Everything the task sent, in order, with ids assigned as the container assigns them."""
        return self.collector.outputs

    def send(
        self,
        stream: str | SystemStream,
        key: Any,
        message: Any,
        *,
        offset: int | None = None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Deliver one message (already deserialised) to the task's ``process``."""
        system_stream = SystemStream.parse(stream) if isinstance(stream, str) else stream
        ssp = SystemStreamPartition(system_stream.system, system_stream.stream, self.partition)
        if offset is None:
            offset = self._offsets.get(ssp, 0)
        self._offsets[ssp] = offset + 1
        envelope = IncomingMessageEnvelope(ssp, offset, key, message, timestamp, 0, headers or [])
        self.collector.begin(system_stream.stream, offset)
        self.task.process(envelope, self.collector, self.coordinator)

    def window(self) -> None:
        """Call the task's ``window`` once."""
        if isinstance(self.task, WindowableTask):
            self.collector.begin("window", 0)
            self.task.window(self.collector, self.coordinator)

    def commit(self) -> None:
        """Flush every store (object caches down to the engine and changelog)."""
        for store in self.stores.values():
            store.flush()

    #: Stores made by :meth:`restore_stores`, closed by :meth:`close`.
    _restored: tuple[StorageEngine[Any, Any], ...] = ()

    def restore_stores(
        self, offsets: dict[str, int | None] | None = None
    ) -> dict[str, StorageEngine[Any, Any]]:
        """Fresh stores rebuilt from what the task's changelogs captured, as a container
        rebuilds them after a crash: new engines in a new directory, each restored from a copy
        of its store's captured changelog (:mod:`samzapy.stores.restore`: replay up to the
        offset, then undo what lies beyond it) to ``offsets[store]``, by default the store's
        last change (``None``: nothing was committed, the store comes back empty).

        Only logged stores are returned: the others have nothing to be restored from. Writes
        still in an object cache were never sent: call :meth:`commit` first to include them.
        The harness's own stores and changelogs are left as they are; :meth:`close` closes the
        restored stores.
        """
        offsets = offsets or {}
        round_dir = self.base_dir / f"restored-{len(self._restored)}"
        restored: dict[str, StorageEngine[Any, Any]] = {}
        for name, captured in self.changelogs.items():
            config = self.job.stores[name]
            changelog = captured.copy()
            key_serde, msg_serde = self.serdes.for_store(config)
            store = build_store(
                config,
                partition=self.partition,
                base_dir=round_dir,
                key_serde=key_serde,
                msg_serde=msg_serde,
                changelog=changelog,
                metrics=self.registry.group(f"store.{name}.{self.task_name}.{round_dir.name}"),
            )
            self._restored = (*self._restored, store)
            store.restore(offsets[name] if name in offsets else changelog.offset())
            restored[name] = store
        return restored

    def close(self) -> None:
        """Close the task's stores (and restored ones) and remove the temporary directory."""
        for store in (*self.stores.values(), *self._restored):
            store.close()
        if self._tmp is not None:
            self._tmp.cleanup()

"""One task: the user's task object, its stores, its offsets, and its error policy."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from samzapy.container.collector import TaskCollector
from samzapy.container.error_policy import ErrorPolicy, FailureCounts
from samzapy.metrics import MetricsGroup
from samzapy.records import Record
from samzapy.serdes import Serde
from samzapy.stores.engine import StorageEngine
from samzapy.streams import SystemStreamPartition
from samzapy.task import ClosableTask, IncomingMessageEnvelope, StreamTask, WindowableTask
from samzapy.user_code import user_failure

log = logging.getLogger(__name__)

#: A task's stores by name (side-input stores included).
TaskStores = dict[str, StorageEngine[Any, Any]]
#: A serde's ``from_bytes``: a key's or message's bytes to the object the task sees.
Decoder = Callable[[bytes], Any]


class Coordinator:
    """The :class:`samzapy.task.TaskCoordinator` of one task: records requests."""

    __slots__ = ("commit_requested", "shutdown_requested")

    def __init__(self) -> None:
        self.commit_requested = False
        self.shutdown_requested = False

    def commit(self) -> None:
        """Ask for a commit after the current call."""
        self.commit_requested = True

    def shutdown(self) -> None:
        """Ask the container to stop (with a final commit) after the current call."""
        self.shutdown_requested = True


class TaskInstance:
    """Runs one task: deserialises its messages, calls the task, tracks its offsets.

    :attr:`writes` is the task's write counter: its collector's, also given to each of its
    stores (a :class:`~samzapy.stores.engine.StorageEngine` counts puts and deletes in it).
    Comparing it before and after a failed call tells the error policy whether the call left a
    trace, at the cost of one attribute read per message.

    ``shared`` names the stores the task uses but does not own (side-input stores, which the
    container's ``SideInputs`` fills and closes): :meth:`close` and :meth:`abandon` leave them open.
    """

    def __init__(
        self,
        task_name: str,
        partition: int,
        task: StreamTask,
        stores: TaskStores,
        collector: TaskCollector,
        input_serdes: dict[SystemStreamPartition, tuple[Serde | None, Serde | None]],
        policy: ErrorPolicy,
        metrics: MetricsGroup,
        shared: frozenset[str] = frozenset(),
    ) -> None:
        self.task_name = task_name
        self.partition = partition
        self.task = task
        self.stores = stores
        self._shared = shared
        self.collector = collector
        self.coordinator = Coordinator()
        self.input_serdes = input_serdes
        self.offsets: dict[SystemStreamPartition, int] = {}
        self._policy = policy
        self.metrics = metrics
        self.writes = collector.writes
        for store in stores.values():
            if isinstance(store, StorageEngine):
                store.writes = self.writes
        self.failures = FailureCounts(metrics)
        self._processed = metrics.counter("messages-actually-processed")
        self._process_ns = metrics.counter("process-ns")
        self._process_latency = metrics.histogram("process-latency")
        self._window_calls = metrics.counter("window-calls")
        self.last_window = time.monotonic()

    def process_records(self, ssp: SystemStreamPartition, records: list[Record], start: int = 0) -> int:
        """Process ``records[start:]`` of ``ssp`` in order, advancing the task's offset for each.

        Returns the index after the last record processed: processing stops early, right
        after the call that asked for it, when the task requests a commit or a shutdown
        (Samza commits after the current ``process`` call, not after a batch).

        Raises:
            MessageFailure: a record failed and the policy is to stop; the offset stays at
                that record, so nothing after it is processed or committed.
        """
        key_of, message_of = self._decoders(ssp)
        process, collector, coordinator = self.task.process, self.collector, self.coordinator
        begin, writes, stream, incoming = collector.begin, self.writes, ssp.stream, IncomingMessageEnvelope
        started = time.perf_counter_ns()
        index, end = start, len(records)
        next_offset = None  # the offset after the last record handled, stored once per batch
        try:
            while index < end:
                record = records[index]
                index += 1
                offset = record.offset
                key, message = record.key, record.value
                try:
                    if key_of is not None and key is not None:
                        key = key_of(key)
                    if message_of is not None and message is not None:
                        message = message_of(message)
                except Exception as exc:
                    self._fail(ssp, record, exc, "could not deserialise", deserialising=True)
                    next_offset = offset + 1
                    continue
                size = (record.serialized_key_size or 0) + (record.serialized_value_size or 0)
                envelope = incoming(ssp, offset, key, message, record.timestamp, size, record.headers or [])
                begin(stream, offset)
                before = writes.value  # "did the call write anything": compared only on failure
                try:
                    process(envelope, collector, coordinator)
                except Exception as exc:
                    self._fail(ssp, record, exc, "process() raised", traceless=writes.value == before)
                next_offset = offset + 1
                if coordinator.commit_requested or coordinator.shutdown_requested:
                    break
        finally:
            if next_offset is not None:
                # one dict store per batch: per message it hashed the frozen SSP each time
                self.offsets[ssp] = next_offset
            done, elapsed = index - start, time.perf_counter_ns() - started
            self._processed.inc(done)
            self._process_ns.inc(elapsed)
            if done:  # per message: the batch's mean, counted once per message
                self._process_latency.observe(elapsed / done / 1e9, done)
        return index

    def _decoders(self, ssp: SystemStreamPartition) -> tuple[Decoder | None, Decoder | None]:
        """The ``from_bytes`` of ``ssp``'s key and message serdes (``None``: bytes as they are)."""
        key_serde, msg_serde = self.input_serdes[ssp]
        return (
            None if key_serde is None else key_serde.from_bytes,
            None if msg_serde is None else msg_serde.from_bytes,
        )

    def _fail(
        self,
        ssp: SystemStreamPartition,
        record: Record,
        exc: BaseException,
        what: str,
        *,
        deserialising: bool = False,
        traceless: bool = True,
    ) -> None:
        self._policy.handle(
            self.failures,
            self.task_name,
            ssp,
            record,
            exc,
            what,
            deserialising=deserialising,
            safe_to_commit=deserialising or traceless,
        )

    def window(self) -> None:
        """Call the task's ``window`` (if it is windowable)."""
        if isinstance(self.task, WindowableTask):
            self.collector.begin("window", int(time.time() * 1000))
            try:
                self.task.window(self.collector, self.coordinator)
            except Exception as exc:
                raise user_failure(self.task_name, "window() raised", exc) from exc
            self._window_calls.inc()
        self.last_window = time.monotonic()

    def flush_stores(self) -> None:
        """Write every store's caches down to the engine and the changelog producer."""
        for store in self.stores.values():
            store.flush()

    def abandon(self) -> None:
        """Close the stores without writing anything more (the task is owned elsewhere now).

        The task's own ``close`` is not called (it could write).
        """
        for store in self._owned():
            getattr(store, "abandon", store.close)()  # a store without a cache to drop just closes

    def close(self) -> None:
        """Close the task (if closable) and its stores."""
        try:
            if isinstance(self.task, ClosableTask):
                self.task.close()
        finally:
            for store in self._owned():
                store.close()

    def _owned(self) -> list[StorageEngine[Any, Any]]:
        return [store for name, store in self.stores.items() if name not in self._shared]

"""Side inputs: stores filled directly from topics (``stores.S.side.inputs``).

Samza's side inputs and Kafka Streams' global tables (docs/side-inputs.md).

:class:`SideInputs` owns every side-input store of a container and one consumer of its own
(the task inputs' consumer is not touched). Its life in the container:

1. :meth:`SideInputs.build` opens each store and checks the offsets stored with it;
2. :meth:`SideInputs.catch_up` reads each side-input partition from the stored offset to
   its *true* end (:func:`samzapy.kafka.reading.read_partition`) before any task is built,
   so ``init`` and the first ``process`` see the whole table;
3. :meth:`SideInputs.pump`, once per loop iteration, applies what has arrived since,
   without blocking;
4. :meth:`SideInputs.close`.

Scope ``partition``: task N's store holds partition N of each side input. Scope ``global``:
one store per container holds every partition, and every task of the container gets that
same (read-only) store, as Kafka Streams keeps one global table per instance.

Consistency: data and next offsets go to the engine in one WriteBatch, so a restart, after
kill -9 too, trusts the stored offsets and reads only the tail. The store is wiped and
rebuilt from the beginning of the topics when its offsets cannot be trusted: it holds
partitions the configuration no longer names, an offset is below the partition's first
offset (records were deleted by retention) or beyond its end (the topic was recreated).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from samzapy.config.model import JobConfig, Processor, StoreConfig
from samzapy.container.side_input_processor import RecordWriter
from samzapy.crashpoints import crash_point
from samzapy.errors import KafkaSystemError
from samzapy.kafka.consumer import Consumer, OffsetOutOfRangeError
from samzapy.kafka.offsets import beginning_offsets, end_offsets
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.kafka.settings import client_settings
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.records import Record, TopicPartition
from samzapy.serdes import SerdeResolver
from samzapy.stores.engine import StorageEngine
from samzapy.stores.paths import global_label, global_store_dir, store_dir
from samzapy.stores.side_input_store import (
    SideInputMemoryStore,
    SideInputRocksDBStore,
    build_side_input_store,
)
from samzapy.streams import task_name_for

log = logging.getLogger(__name__)

#: Records handed back by one non-blocking poll of the running phase.
MAX_PUMP_RECORDS = 5000
#: How long a fetch at a stored offset may stay empty before the offset counts as beyond the
#: end: long, because a false "beyond" costs a full rebuild, and a present record comes at once.
EXISTS_POLL_MS = 3000


@dataclass
class SideInputTarget:
    """One side-input store instance and the partitions that fill it."""

    config: StoreConfig
    store: StorageEngine[Any, Any]
    writer: RecordWriter
    tps: list[TopicPartition]
    metrics: MetricsGroup
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # next offset to apply

    @property
    def engine(self) -> SideInputRocksDBStore | SideInputMemoryStore:
        """The raw engine (``apply``, ``offsets``, ``wipe``)."""
        # build_side_input_store puts one of these under every side-input store
        return cast(SideInputRocksDBStore | SideInputMemoryStore, self.store.raw)

    def apply(self, tp: TopicPartition, records: list[Record], *, restoring: bool = False) -> None:
        """Apply the records of ``tp`` not applied yet, with the next offset, atomically."""
        start = self.offsets.get(tp, 0)
        records = [r for r in records if r.offset >= start]
        if not records:
            return
        skipped = self.writer.skipped
        writes = self.writer.writes(self.config.side_inputs[0].system, tp.topic, tp.partition, records)
        next_offset = records[-1].offset + 1
        self.engine.apply(writes.items(), {(tp.topic, tp.partition): next_offset})
        self.offsets[tp] = next_offset
        self.metrics.counter("restored-records" if restoring else "updates").inc(len(records))
        self.metrics.counter("records-applied").inc(len(records))
        if self.writer.skipped > skipped:
            self.metrics.counter("skipped-records").inc(self.writer.skipped - skipped)
            log.warning(
                "store %s: skipped %d side-input records of %s/%d without a key",
                self.config.name,
                self.writer.skipped - skipped,
                tp.topic,
                tp.partition,
            )


class SideInputs:
    """Every side-input store of a container, and the consumer that keeps them filled."""

    def __init__(
        self,
        consumer: Consumer | None,
        targets: list[SideInputTarget],
        by_task: dict[tuple[str, int], StorageEngine[Any, Any]],
    ) -> None:
        self._consumer = consumer  # None: the job has no side-input store
        self.targets = targets
        self._by_task = by_task  # (store name, task partition) -> StorageEngine
        self._by_tp: dict[TopicPartition, list[SideInputTarget]] = {}
        for target in targets:
            for tp in target.tps:
                self._by_tp.setdefault(tp, []).append(target)

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        job: JobConfig,
        partitions: list[int],
        servers: str,
        serdes: SerdeResolver,
        registry: MetricsRegistry,
        container_id: int = 0,
    ) -> SideInputs:
        """Open the side-input stores of the tasks ``partitions``.

        A job without side-input stores gets an object that does nothing (and opens no
        consumer).

        Raises:
            KafkaSystemError: a side-input topic does not exist.
            ConfigError: a processor is configured but ``job`` was parsed without importing
                user code (``parse_job_config(..., check_task_class=True)`` imports it).
        """
        if not any(s.has_side_inputs for s in job.stores.values()):
            return cls(None, [], {})
        consumer = reader_consumer(
            servers, auto_offset_reset="none", **client_settings(job.consumer_overrides)
        )
        targets: list[SideInputTarget] = []
        by_task: dict[tuple[str, int], StorageEngine[Any, Any]] = {}
        try:
            for store_config in (s for s in job.stores.values() if s.has_side_inputs):
                counts = _partition_counts(consumer, store_config)
                processor = store_config.processor  # imported when the configuration was parsed
                for instance in _instances(job, store_config, counts, partitions, container_id):
                    target = _target(instance, store_config, processor, serdes, registry)
                    targets.append(target)
                    for p in instance.owners:
                        by_task[(store_config.name, p)] = target.store
        except BaseException:
            consumer.close()
            for target in targets:
                target.store.close()
            raise
        return cls(consumer, targets, by_task)

    def store(self, name: str, partition: int) -> StorageEngine[Any, Any]:
        """The store ``name`` as task ``partition`` gets it (shared by all tasks if global)."""
        return self._by_task[(name, partition)]

    @property
    def _reader(self) -> Consumer:
        """The consumer, which only a job with side-input stores has.

        Only such a job has targets and partitions to read: the methods ask for it only then.
        """
        assert self._consumer is not None, "no side-input store: nothing to read"
        return self._consumer

    # -- start-up: to the true end ----------------------------------------------------------

    def catch_up(self) -> None:
        """Bring every store to the true end of its side-input partitions (module doc)."""
        for target in self.targets:
            started = time.monotonic()
            self._check_offsets(target)
            before = target.metrics.counter("restored-records").value
            for tp in target.tps:
                for batch in read_partition(self._reader, tp, target.offsets[tp]):
                    target.apply(tp, batch, restoring=True)
                    crash_point("during-side-input-restore")
            read = target.metrics.counter("restored-records").value - before
            log.info(
                "side-input store %s (%s) read to the end of %s: %d records in %.1fs",
                target.config.name,
                target.metrics.name,
                ", ".join(f"{tp.topic}/{tp.partition}@{target.offsets[tp]}" for tp in target.tps),
                read,
                time.monotonic() - started,
            )
        self._assign()

    def _check_offsets(self, target: SideInputTarget) -> None:
        stored = {TopicPartition(t, p): o for (t, p), o in target.engine.offsets().items()}
        # Several topics at once, after reads that assigned one partition at a time: kafka-python
        # may answer without some of them; samzapy.kafka.offsets asks again.
        begins = beginning_offsets(self._reader, target.tps)
        ends = end_offsets(self._reader, target.tps)
        reason = None
        if set(stored) - set(target.tps):
            reason = "it holds partitions no longer configured: " + ", ".join(
                f"{tp.topic}/{tp.partition}" for tp in sorted(set(stored) - set(target.tps))
            )
        for tp in target.tps:
            offset = stored.get(tp)
            if reason is not None or offset is None:
                continue
            if offset < begins[tp]:
                reason = (
                    f"its offset {offset} of {tp.topic}/{tp.partition} is below the first offset {begins[tp]}"
                )
            elif offset > ends[tp] and not self._reaches(tp, offset):
                reason = f"its offset {offset} of {tp.topic}/{tp.partition} is beyond the end of the topic"
        if reason is not None:
            log.warning(
                "side-input store %s (%s): %s; rebuilding it", target.config.name, target.metrics.name, reason
            )
            target.engine.wipe()
            stored = {}
        target.offsets = {tp: stored.get(tp, begins[tp]) for tp in target.tps}

    def _reaches(self, tp: TopicPartition, offset: int) -> bool:
        """Whether the log of ``tp`` reaches ``offset``: a fetch at ``offset - 1`` returns a record.

        Needed because the dev broker's reported end undercounts (DESIGN §10); any record
        counts, since compaction may have removed the one at ``offset - 1`` itself.
        """
        self._reader.assign([tp])
        self._reader.seek(tp, offset - 1)
        deadline = time.monotonic() + EXISTS_POLL_MS / 1000
        try:
            while time.monotonic() < deadline:
                if self._reader.poll(timeout_ms=100).get(tp):
                    return True
        except OffsetOutOfRangeError:  # a real Kafka says so at once
            return False
        return False

    def _assign(self) -> None:
        tps = sorted(self._by_tp)
        if not tps:
            return
        self._reader.assign(tps)
        for tp in tps:
            self._reader.seek(tp, min(t.offsets[tp] for t in self._by_tp[tp]))

    # -- running ----------------------------------------------------------------------------

    def pump(self) -> int:
        """Apply the side-input records that have arrived, without waiting; returns how many."""
        if not self._by_tp:
            return 0
        polled = self._reader.poll(timeout_ms=0, max_records=MAX_PUMP_RECORDS)
        count = 0
        for tp, records in polled.items():
            for target in self._by_tp.get(tp, ()):
                target.apply(tp, records)
            count += len(records)
        return count

    def close(self) -> None:
        """Close the consumer and every store (closing a store twice is harmless)."""
        try:
            if self._consumer is not None:
                self._consumer.close()
        finally:
            for target in self.targets:
                target.store.close()


def _partition_counts(consumer: Consumer, config: StoreConfig) -> dict[str, int]:
    counts: dict[str, int] = {}
    for stream in config.side_inputs:
        found = consumer.partitions_for_topic(stream.stream)
        if not found:
            msg = (
                f"side input '{stream}' of store '{config.name}' (stores.{config.name}.side.inputs) does "
                "not exist on the broker: create the topic (or produce to it) before starting the job"
            )
            raise KafkaSystemError(msg)
        counts[stream.stream] = len(found)
    return counts


@dataclass(frozen=True)
class _Instance:
    """Where one store instance lives, which tasks get it, which partitions fill it."""

    label: str  # "Partition N" or "Global_<container id>": metrics group and log name
    path: Path
    partition: int  # the task's partition, -1 for a global store
    owners: list[int]
    tps: list[TopicPartition]


def _instances(
    job: JobConfig, config: StoreConfig, counts: dict[str, int], partitions: list[int], container_id: int
) -> list[_Instance]:
    """The store instances of ``config`` for the tasks ``partitions`` (module doc: scope)."""
    base = job.logged_store_base_dir
    if config.side_inputs_scope == "global":
        if not partitions:
            return []
        label = global_label(container_id)
        tps = [TopicPartition(topic, p) for topic, n in counts.items() for p in range(n)]
        path = global_store_dir(base, config.name, container_id)
        return [_Instance(label, path, -1, list(partitions), tps)]
    return [
        _Instance(
            task_name_for(p),
            store_dir(base, config.name, p),
            p,
            [p],
            [TopicPartition(topic, p) for topic, n in counts.items() if p < n],
        )
        for p in partitions
    ]


def _target(
    instance: _Instance,
    config: StoreConfig,
    processor: Processor | None,
    serdes: SerdeResolver,
    registry: MetricsRegistry,
) -> SideInputTarget:
    key_serde, msg_serde = serdes.for_store(config)
    metrics = registry.group(f"store.{config.name}.{instance.label}")
    store = build_side_input_store(
        config,
        path=instance.path,
        key_serde=key_serde,
        msg_serde=msg_serde,
        metrics=metrics,
        partition=instance.partition,
    )
    stream_serdes = {s.stream: serdes.for_stream(s) for s in config.side_inputs}
    writer = RecordWriter(config.name, processor, stream_serdes, (key_serde, msg_serde), store)
    return SideInputTarget(config, store, writer, instance.tps, metrics)

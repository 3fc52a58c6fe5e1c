"""The executor side of a replay: one task of the job, run over its input ranges.

The task runs through the container's own machinery — built by
:class:`~samzapy.container.task_builder.TaskBuilder` (stores in a local RocksDB directory,
context, ``init``), run by :class:`TaskInstance` (deserialising, ``process``, the error
policy, offsets) with a :class:`TaskCollector` (serialisation, partitioning, the
``samzapy.id`` header ``<task>:<input offset>:<n>``) — so its outputs carry the same ids and
bytes as the streaming run's.

Delivery order, deterministic for a given plan:

1. the task's bootstrap streams (``samza.bootstrap=true``) from start to stop, before anything
   else — a streaming job started on this history would read them to their end first too;
2. the other streams merged as a streaming run with ``task.input.order=timestamp`` takes a
   backlog (:func:`samzapy.container.input_order.order_key`): higher ``samza.priority`` first,
   then record timestamp, ties by stream order in ``task.inputs``, then offset; each partition
   stays in offset order (a k-way merge of the partitions' offset-ordered records, never a
   sort that could reorder one partition).

``window()`` is called by event time, not wall-clock time: whenever the largest record
timestamp seen has advanced by ``task.window.ms`` since the last call (before the record that
crossed the boundary is processed), and once after the last record. Tasks that emit by
watermark (the pattern jobs) produce the same results either way; a task whose output depends
on how often ``window()`` runs in wall-clock time cannot be replayed exactly.

``coordinator.commit()`` is a no-op here (the replay commits once, at its end);
``coordinator.shutdown()`` stops the task's replay where it is, as it stops a container.

At the end the task's stores are flushed; in Kafka mode their final contents are written to
their changelog partitions (tombstones for keys the changelog holds but the store does not,
then every entry), and the acknowledged offset of the last write is the changelog offset of
the task's checkpoint. RocksDB stores are also written as SST files for the driver to ingest.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samzapy.config import Config, parse_job_config

if TYPE_CHECKING:
    from samzapy.records import RecordSink

log = logging.getLogger(__name__)

#: Consecutive records of one partition handed to ``process_records`` at once.
MAX_RUN = 1000


@dataclass(frozen=True)
class InputRange:
    """One input partition of a task: offsets ``start`` to ``stop`` (exclusive)."""

    system: str
    stream: str
    partition: int
    start: int
    stop: int
    bootstrap: bool = False
    priority: int = 0


@dataclass(frozen=True)
class TaskPlan:
    """What one replay task reads: its partition number and its input ranges."""

    partition: int
    inputs: tuple[InputRange, ...]


@dataclass(frozen=True)
class ReplaySettings:
    """What every replay task needs, shipped to the executors."""

    config: Config
    consumer_servers: str
    producer_servers: str
    task_count: int
    output_dir: str | None = None  # None: outputs to Kafka
    file_format: str = "parquet"
    publish_changelogs: bool = True
    handoff: str = "shared"
    staging: str = ""


def run_partition(plans: Iterator[TaskPlan], settings: ReplaySettings) -> Iterator[dict[str, Any]]:
    """``mapPartitions`` entry point: run each plan of the Spark partition (there is one)."""
    for plan in plans:
        yield run_replay_task(plan, settings)


def run_replay_task(plan: TaskPlan, settings: ReplaySettings) -> dict[str, Any]:
    """Run one task over its ranges; a dict the driver turns into stores and a checkpoint."""
    started = time.perf_counter()
    job = parse_job_config(settings.config, check_task_class=True)  # imports task.class, once
    work = Path(tempfile.mkdtemp(prefix=f"samzapy-replay-{plan.partition}-"))
    sink = _sink(settings, plan.partition, job)
    admin: list[Any] = []
    instance = None
    side_inputs = None
    try:
        side_inputs = _side_inputs(plan, settings, job, work)
        instance = _build_instance(plan, settings, job, sink, work, admin, side_inputs)
        processed = _process(instance, plan, settings.consumer_servers, job.window_ms)
        if job.window_ms is not None:
            instance.window()
        instance.flush_stores()
        sink.flush()
        stores = [
            _finish_store(instance, name, plan, settings, sink)
            for name in instance.stores
            if not job.stores[name].has_side_inputs  # rebuilt from its topic by any run
        ]
        return {
            "partition": plan.partition,
            "task": instance.task_name,
            "inputs": {str(ssp): offset for ssp, offset in instance.offsets.items()},
            "stores": stores,
            "processed": processed,
            "outputs": instance.collector.sent,
            "window_calls": instance.metrics.counter("window-calls").value,
            "seconds": time.perf_counter() - started,
            "files": getattr(sink, "files", []),
        }
    finally:
        if instance is not None:
            instance.close()
        if side_inputs is not None:
            side_inputs.close()
        sink.close()
        for a in admin:
            a.close()
        shutil.rmtree(work, ignore_errors=True)


def _sink(settings: ReplaySettings, partition: int, job: Any) -> RecordSink:
    if settings.output_dir is not None:
        from samzapy.spark.replay.sinks import FileOutputs

        return FileOutputs(settings.output_dir, partition, settings.file_format)
    from samzapy.kafka.producer import Producer
    from samzapy.kafka.settings import client_settings

    return Producer(settings.producer_servers, client_settings(job.producer_overrides))


def _side_inputs(plan: TaskPlan, settings: ReplaySettings, job: Any, work: Path) -> Any:
    """The task's side-input stores, read to the true end of their topics.

    As a container reads them at start: a replay sees the table as it is now, not as it was when
    the replayed input was first processed (docs/side-inputs.md).
    """
    from dataclasses import replace

    from samzapy.container.side_inputs import SideInputs
    from samzapy.metrics import MetricsRegistry
    from samzapy.serdes import SerdeResolver

    side_inputs = SideInputs.build(
        replace(job, logged_store_base_dir=work),
        [plan.partition],
        settings.consumer_servers,
        SerdeResolver(job),
        MetricsRegistry(),
    )
    try:
        side_inputs.catch_up()
    except BaseException:
        side_inputs.close()
        raise
    return side_inputs


def _build_instance(
    plan: TaskPlan,
    settings: ReplaySettings,
    job: Any,
    sink: RecordSink,
    work: Path,
    admin: list[Any],
    side_inputs: Any,
) -> Any:
    """The task, built as the container builds it (:class:`TaskBuilder`).

    Its stores are in ``work`` with discarding changelogs, its outputs go to ``sink``.
    """
    from samzapy.container.collector import OutputStreams
    from samzapy.container.error_policy import ErrorPolicy
    from samzapy.container.task_builder import TaskBuilder, ensure_output_topic
    from samzapy.metrics import MetricsRegistry
    from samzapy.stores.changelog import DiscardingChangelog
    from samzapy.streams import SystemStreamPartition

    # The logged layer stays (as in streaming) but sends nothing: a replay publishes the
    # final state once, at its end.
    builder = TaskBuilder(
        job,
        base_dir=work,
        registry=MetricsRegistry(),
        changelog_for=lambda store_config, partition: DiscardingChangelog(),
        side_inputs=side_inputs,
    )

    def output_partitions(stream: Any) -> int:
        """As the container's; in file mode nothing is created."""
        from samzapy.kafka.admin import TopicAdmin

        if not admin:
            admin.append(TopicAdmin(settings.producer_servers))
        create = settings.output_dir is None
        return ensure_output_topic(admin[0], job, stream, settings.task_count, create=create)

    ssps = {SystemStreamPartition(r.system, r.stream, r.partition): r for r in plan.inputs}
    task_class = job.task_type  # imported once, by the parse
    stores = builder.stores(plan.partition)
    outputs = OutputStreams(builder.serdes, output_partitions)
    instance = builder.instance(
        plan.partition, task_class(), stores, sink, outputs, ssps, ErrorPolicy(job, sink)
    )
    instance.offsets.update({ssp: r.start for ssp, r in ssps.items()})
    return instance


def merged_records(plan: TaskPlan, servers: str, consumers: list[Any]) -> Iterator[tuple[int, Any]]:
    """``(input index, record)`` in delivery order (module doc); opened consumers go to ``consumers``."""
    from samzapy.container.input_order import merge_in_order
    from samzapy.kafka.reading import read_partition, reader_consumer
    from samzapy.records import TopicPartition

    def records(rng: InputRange) -> Iterator[Any]:
        consumer = reader_consumer(servers)
        consumers.append(consumer)
        for batch in read_partition(consumer, TopicPartition(rng.stream, rng.partition), rng.start, rng.stop):
            yield from batch

    # The plan lists a task's inputs in task.inputs order (absent streams left out, which
    # keeps the others' relative order): the index is the streaming run's tie-break too.
    indexed = [(i, r) for i, r in enumerate(plan.inputs) if r.stop > r.start]
    where = {(r.stream, r.partition): i for i, r in indexed}
    sources = [((int(r.bootstrap), r.priority, i, r.partition), records(r)) for i, r in indexed]
    for record in merge_in_order(sources):
        yield where[record.topic, record.partition], record


def _process(instance: Any, plan: TaskPlan, servers: str, window_ms: int | None) -> int:
    from samzapy.streams import SystemStreamPartition

    ssps = [SystemStreamPartition(r.system, r.stream, r.partition) for r in plan.inputs]
    windowable = window_ms is not None and hasattr(instance.task, "window")
    consumers: list[Any] = []
    run: list[Any] = []
    run_index = -1
    processed = 0
    next_window: int | None = None

    def flush() -> bool:
        nonlocal run, processed
        if run:
            instance.process_records(ssps[run_index], run)
            processed += len(run)
            run = []
        requested: bool = instance.coordinator.shutdown_requested
        return requested

    try:
        for index, record in merged_records(plan, servers, consumers):
            if run and (index != run_index or len(run) >= MAX_RUN) and flush():
                break
            if windowable:
                if next_window is None:
                    next_window = record.timestamp + window_ms
                elif record.timestamp >= next_window:
                    if flush():
                        break
                    instance.window()
                    next_window = record.timestamp + window_ms
            run_index = index
            run.append(record)
        else:
            flush()
        if instance.coordinator.shutdown_requested:
            log.info("%s asked to shut down: its replay stops here", instance.task_name)
    finally:
        for consumer in consumers:
            consumer.close()
    return processed


def _finish_store(
    instance: Any, name: str, plan: TaskPlan, settings: ReplaySettings, sink: RecordSink
) -> dict[str, Any]:
    from samzapy.spark.sst import SstSink, executor_dir, file_chunks

    store = instance.stores[name]
    job_store = parse_job_config(settings.config).stores[name]
    offset = None
    if settings.output_dir is None and settings.publish_changelogs and job_store.changelog is not None:
        offset = publish_final_state(store.raw, job_store.changelog.stream, plan.partition, sink, settings)
    files: list[dict[str, Any]] = []
    entries = 0
    if job_store.engine == "rocksdb" and job_store.ttl_ms is None:
        directory = executor_dir(settings.handoff, settings.staging)
        sst = SstSink(directory, job_store, plan.partition, 0)
        with store.raw.all() as it:
            for entry in it:
                sst.put(entry.key, entry.value)
                entries += 1
        for written in sst.close():
            item = {"path": written.path, "order": written.order, "entries": written.entries}
            if settings.handoff == "collect":
                item["chunks"] = [data for _, data in file_chunks(written.path)]
            files.append(item)
        if settings.handoff == "collect":
            shutil.rmtree(directory, ignore_errors=True)
    return {"store": name, "changelog_offset": offset, "files": files, "entries": entries}


def publish_final_state(
    raw: Any, topic: str, partition: int, producer: RecordSink, settings: ReplaySettings
) -> int | None:
    """Make the changelog partition's last value per key equal the store.

    The offset of the last changelog record that belongs to that state (``None``: the changelog
    is empty).

    Reads the partition's live keys first (keys only, in memory), sends a tombstone for each
    one the store does not hold, then every entry of the store, and flushes.
    """
    from samzapy.kafka.reading import read_partition, reader_consumer
    from samzapy.records import TopicPartition
    from samzapy.spark.kafka_source import true_end_offset

    tp = TopicPartition(topic, partition)
    consumer = reader_consumer(settings.consumer_servers)
    live: set[bytes] = set()
    try:
        begin = consumer.beginning_offsets([tp])[tp]
        for batch in read_partition(consumer, tp, begin):
            for record in batch:
                if record.key is None:
                    continue
                if record.value is None:
                    live.discard(record.key)
                else:
                    live.add(record.key)
        end = true_end_offset(consumer, tp)
    finally:
        consumer.close()
    sent = 0
    for key in sorted(live):
        if raw.get(key) is None:
            producer.send(topic, key, None, partition=partition)
            sent += 1
    with raw.all() as it:
        for entry in it:
            producer.send(topic, entry.key, entry.value, partition=partition)
            sent += 1
    producer.flush()
    if sent:
        return producer.acked_offset(topic, partition)
    return end - 1 if end > 0 else None

"""Replay: a job's own task class over its input history in Spark (DESIGN §8).

One codebase for streaming and reprocessing: each Spark partition runs one task of the job
(task N reads partition N of every input, Samza's GroupByPartition) through the container's
``TaskInstance`` and ``TaskCollector`` (:mod:`samzapy.spark.replay.partition`), so outputs carry the
same ``samzapy.id`` headers and bytes as the streaming run's.

The driver:

1. fixes every input partition's range before anything runs: start ``oldest``, explicit
   offsets or the first record at/after ``from_time``; stop ``latest`` (the TRUE end, read past
   the dev broker's undercounted end offset), explicit offsets or the first record after
   ``to_time``. Times are found by binary search over reads (the dev broker's
   ``offsets_for_times`` returns 0; :func:`samzapy.spark.kafka_source.offset_for_time`);
2. runs the tasks (``sc.parallelize(plans, len(plans))``: exactly one task per Spark
   partition; reading happens inside each task, so there is no shuffle and per-partition
   order is never at risk);
3. ingests each task's final stores (SST files) into ``state_dir`` in the job's layout and,
   in Kafka mode, writes each task's checkpoint (input next-offsets = the range stops,
   changelog offsets = the acknowledged offsets of the final-state writes) to the job's
   checkpoint topic, with a local checkpoint at the same offsets beside each store. A
   streaming job started afterwards on ``state_dir`` restores nothing and continues exactly
   where the replay ended; on another host it restores the stores from the changelogs,
   which hold the replay's final state.

Stop the streaming job while a replay with Kafka output runs: both would write the same
changelogs and checkpoints. Output mode ``files`` touches nothing in Kafka (no changelog, no
checkpoint): outputs, stores and a ``checkpoint.json`` go under the output directory.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import Config, JobConfig, load_config, parse_job_config
from samzapy.spark import SparkJobError
from samzapy.spark.replay.partition import InputRange, ReplaySettings, TaskPlan, run_partition
from samzapy.spark.sst import HANDOFFS, SstFile, ingest_store, write_collected
from samzapy.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)

OffsetSpec = str | dict[tuple[str, int], int]  # "oldest" / "latest" or {(stream, partition): offset}


@dataclass
class ReplayStats:
    """What a replay did; ``spark_start_s`` is Spark's start-up alone."""

    tasks: int = 0
    records: int = 0
    outputs: int = 0
    window_calls: int = 0
    checkpoints: dict[str, TaskCheckpoint] = field(default_factory=dict)
    output_files: list[str] = field(default_factory=list)
    spark_start_s: float = 0.0
    plan_s: float = 0.0
    spark_job_s: float = 0.0
    finalize_s: float = 0.0
    total_s: float = 0.0


def parse_offsets(text: str) -> OffsetSpec:
    """``oldest``/``latest`` or ``stream:partition=offset,...``.

    >>> parse_offsets("pageviews:0=10,pageviews:1=20")
    {('pageviews', 0): 10, ('pageviews', 1): 20}
    >>> parse_offsets("oldest")
    'oldest'
    """
    text = text.strip()
    if text in ("oldest", "latest"):
        return text
    result: dict[tuple[str, int], int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        where, eq, offset = item.rpartition("=")
        stream, colon, partition = where.rpartition(":")
        if not eq or not colon or not stream or not partition.isdigit() or not offset.lstrip("-").isdigit():
            msg = f"'{item}' is not stream:partition=offset (e.g. pageviews:0=1200)"
            raise ValueError(msg)
        result[(stream, int(partition))] = int(offset)
    return result


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ``1700000000000`` or ISO 8601 (naive = UTC).

    >>> parse_time("1970-01-01T00:00:01")
    1000
    >>> parse_time("1500")
    1500
    """
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        msg = f"'{text}' is neither milliseconds since the epoch nor an ISO 8601 time"
        raise ValueError(msg) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _load(config: str | Path | Config) -> tuple[Config, JobConfig]:
    raw = config if isinstance(config, Config) else load_config(config)
    return raw, parse_job_config(raw, check_task_class=True)


def replay(
    config: str | Path | Config,
    *,
    start: OffsetSpec = "oldest",
    from_time: int | None = None,
    stop: OffsetSpec = "latest",
    to_time: int | None = None,
    output: str = "kafka",
    file_format: str = "parquet",
    state_dir: str | Path | None = None,
    write_checkpoint: bool = True,
    master: str | None = None,
    handoff: str = "shared",
    staging_dir: str | Path | None = None,
) -> ReplayStats:
    """Replay the job's input history through its task class (module doc).

    Args:
        config: the job's .properties path or :class:`Config`.
        start: where each input partition starts (offsets, ``oldest`` or ``latest``).
        from_time: start at this event time instead (wins over ``start``).
        stop: where each input partition stops, exclusive.
        to_time: stop after the last record at or before this time instead (wins over ``stop``).
        output: ``kafka`` or a directory for output files.
        file_format: ``parquet`` or ``avro`` (file output).
        state_dir: where the final stores go (default: ``job.logged.store.base.dir`` in Kafka
            mode, ``<output>/state`` in file mode).
        write_checkpoint: Kafka mode: write the tasks' checkpoints to the checkpoint topic.
        master: Spark master URL (default: spark-submit's, else ``local[*]``).
        handoff: how SST files reach the driver (:mod:`samzapy.spark.sst`).
        staging_dir: where the executors stage SST files for the driver (``handoff``).

    Raises:
        SparkJobError: bad ranges, or a task failed (the message names stream, partition and
            offset for a message that failed).
    """
    from samzapy.kafka.broker import resolve_bootstrap_servers
    from samzapy.spark.session import executor_error, get_spark

    if handoff not in HANDOFFS:
        msg = f"handoff '{handoff}' is not one of {', '.join(HANDOFFS)}"
        raise SparkJobError(msg)
    started = time.perf_counter()
    raw, job = _load(config)
    consumer_servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
    producer_servers = resolve_bootstrap_servers(job.producer_bootstrap_servers)
    to_files = output != "kafka"
    output_dir = Path(output) if to_files else None
    state = (
        Path(state_dir) if state_dir else (output_dir / "state" if output_dir else job.logged_store_base_dir)
    )
    staging = Path(staging_dir) if staging_dir else state / f".sst-staging-{uuid.uuid4().hex[:12]}"
    stats = ReplayStats()
    plans, task_count = plan_tasks(job, consumer_servers, start, from_time, stop, to_time)
    if not to_files:
        _ensure_topics(job, producer_servers, task_count)
    stats.plan_s = time.perf_counter() - started
    settings = ReplaySettings(
        config=raw,
        consumer_servers=consumer_servers,
        producer_servers=producer_servers,
        task_count=task_count,
        output_dir=str(output_dir / "outputs") if output_dir else None,
        file_format=file_format,
        publish_changelogs=not to_files,
        handoff=handoff,
        staging=str(staging),
    )
    spark, stats.spark_start_s = get_spark(master, f"samzapy-replay-{job.job_name}")
    job_started = time.perf_counter()
    try:
        results = (
            spark.sparkContext.parallelize(plans, len(plans))
            .mapPartitions(lambda it: run_partition(it, settings))
            .collect()
        )
    except Exception as exc:
        msg = f"the replay of job '{job.job_name}' failed: {executor_error(exc)}"
        raise SparkJobError(msg) from exc
    stats.spark_job_s = time.perf_counter() - job_started
    finalize_started = time.perf_counter()
    try:
        _finalize(job, results, state, staging, handoff, stats)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if to_files:
        assert output_dir is not None
        _write_checkpoint_file(output_dir, stats.checkpoints)
    elif write_checkpoint:
        _write_checkpoints(job, producer_servers, stats.checkpoints)
    stats.finalize_s = time.perf_counter() - finalize_started
    stats.total_s = time.perf_counter() - started
    log.info(
        "replayed %d records through %d tasks in %.1fs (Spark start %.1fs, job %.1fs): %d outputs",
        stats.records,
        stats.tasks,
        stats.total_s,
        stats.spark_start_s,
        stats.spark_job_s,
        stats.outputs,
    )
    return stats


def plan_tasks(
    job: JobConfig,
    servers: str,
    start: OffsetSpec,
    from_time: int | None,
    stop: OffsetSpec,
    to_time: int | None,
) -> tuple[list[TaskPlan], int]:
    """Every task's input ranges, fixed now (module doc, step 1); and the task count."""
    from samzapy.kafka.reading import reader_consumer
    from samzapy.records import TopicPartition
    from samzapy.spark.kafka_source import offset_for_time, true_end_offset

    consumer = reader_consumer(servers)
    try:
        counts = _partition_counts(job, consumer)
        task_count = max(counts.values())
        ranges: dict[int, list[InputRange]] = {p: [] for p in range(task_count)}
        for stream, count in counts.items():
            config = job.stream(stream)
            for partition in range(count):
                tp = TopicPartition(stream.stream, partition)
                begin = consumer.beginning_offsets([tp])[tp]
                end = true_end_offset(consumer, tp)
                first = _bound(start, stream.stream, partition, begin, "--from")
                last = _bound(stop, stream.stream, partition, end, "--to")
                if from_time is not None:
                    first = offset_for_time(consumer, tp, from_time, begin, end)
                if to_time is not None:
                    last = offset_for_time(consumer, tp, to_time + 1, first, end)
                if not begin <= first <= last <= end:
                    msg = (
                        f"input {stream.stream} partition {partition}: range {first}..{last} is not "
                        f"within the partition's offsets {begin}..{end} (or starts after it stops)"
                    )
                    raise SparkJobError(msg)
                ranges[partition].append(
                    InputRange(
                        stream.system,
                        stream.stream,
                        partition,
                        first,
                        last,
                        config.bootstrap,
                        config.priority,
                    )
                )
                log.info("replay: %s partition %d offsets %d..%d", stream.stream, partition, first, last)
    finally:
        consumer.close()
    return [TaskPlan(p, tuple(r)) for p, r in ranges.items()], task_count


def _partition_counts(job: JobConfig, consumer: Any) -> dict[SystemStream, int]:
    counts = {}
    for stream in job.inputs:
        found = consumer.partitions_for_topic(stream.stream)
        if not found:
            msg = f"input stream '{stream}' does not exist on the broker: nothing to replay"
            raise SparkJobError(msg)
        counts[stream] = len(found)
    if not counts:
        msg = "the job has no task.inputs: nothing to replay"
        raise SparkJobError(msg)
    return counts


def _bound(spec: OffsetSpec, stream: str, partition: int, default: int, option: str) -> int:
    if isinstance(spec, str):
        if spec not in ("oldest", "latest"):
            msg = f"{option} '{spec}' is not oldest, latest or stream:partition=offset"
            raise SparkJobError(msg)
        return default
    return spec.get((stream, partition), default)


def _ensure_topics(job: JobConfig, servers: str, task_count: int) -> None:
    from samzapy.kafka.admin import TopicAdmin

    with TopicAdmin(servers) as admin:
        admin.ensure_topic(job.checkpoint_topic, 1, compact=True, replication_factor=job.replication_factor)
        for store in job.stores.values():
            if store.changelog is not None:
                admin.ensure_topic(
                    store.changelog.stream,
                    task_count,
                    compact=True,
                    replication_factor=job.replication_factor,
                    expect_partitions=task_count,
                )


def _finalize(
    job: JobConfig,
    results: list[dict[str, Any]],
    state: Path,
    staging: Path,
    handoff: str,
    stats: ReplayStats,
) -> None:
    for result in sorted(results, key=lambda r: r["partition"]):
        partition = result["partition"]
        changelogs: dict[str, int | None] = {}
        for store in result["stores"]:
            config = job.stores[store["store"]]
            offset = store["changelog_offset"]
            if config.changelog is not None:
                changelogs[config.name] = offset
            if config.engine != "rocksdb" or config.ttl_ms is not None:
                continue
            files = [_placed(job, store["store"], partition, f, staging, handoff) for f in store["files"]]
            ingest_store(config, state, partition, files, offset)
        inputs = {SystemStreamPartition.parse(k): v for k, v in result["inputs"].items()}
        stats.checkpoints[result["task"]] = TaskCheckpoint(result["task"], inputs, changelogs)
        stats.tasks += 1
        stats.records += result["processed"]
        stats.outputs += result["outputs"]
        stats.window_calls += result["window_calls"]
        stats.output_files.extend(result["files"])


def _placed(
    job: JobConfig, store: str, partition: int, item: dict[str, Any], staging: Path, handoff: str
) -> SstFile:
    path = item["path"]
    if handoff == "collect":
        rows = [{"path": path, "chunk": i, "data": data} for i, data in enumerate(item["chunks"])]
        path = write_collected(rows, staging)[path]
    return SstFile(store, partition, item["order"], path, item["entries"])


def _write_checkpoints(job: JobConfig, servers: str, checkpoints: dict[str, TaskCheckpoint]) -> None:
    from dataclasses import replace

    from samzapy.checkpoint import CheckpointWriter, read_checkpoints
    from samzapy.kafka.producer import Producer
    from samzapy.kafka.settings import client_settings

    # The replay takes the tasks over: its checkpoints need a generation above the streaming
    # job's, or readers (the newest of the highest generation wins) would ignore them.
    existing = read_checkpoints(servers, job.checkpoint_topic)
    producer = Producer(servers, client_settings(job.producer_overrides))
    try:
        writer = CheckpointWriter(producer, job.checkpoint_topic)
        for name, checkpoint in checkpoints.items():
            old = existing.get(name)
            writer.write(replace(checkpoint, generation=old.generation + 1 if old else checkpoint.generation))
        producer.flush()
    finally:
        producer.close()
    log.info("wrote %d task checkpoints to %s", len(checkpoints), job.checkpoint_topic)


def _write_checkpoint_file(output_dir: Path, checkpoints: dict[str, TaskCheckpoint]) -> None:
    body = {name: json.loads(c.to_bytes()) for name, c in sorted(checkpoints.items())}
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "checkpoint.json").write_text(json.dumps(body, indent=1))

"""Write state from batch data.

A DataFrame of (key, value) becomes a job's store — in its changelog, as local stores a job
adopts without a replay, and in its checkpoints.

:func:`write_state` routes each row to the task that owns its key (the job's partitioner over
the store's layout's partition key: :mod:`samzapy.operators.state_layout`), encodes it with the
store's serdes, and hands the rows to :func:`rewrite_partitions`, which
:mod:`samzapy.spark.state_data.reshard` and :mod:`samzapy.spark.state_data.migrate` use too. For each store
partition (one Spark task each, rows sorted by key) it:

1. reads the changelog partition's live keys (last value per key, to the true end);
2. sends every new (key, value) to the changelog partition, and a tombstone for every live
   key that is not among them: the changelog's last value per key is then exactly the rows;
3. writes the rows as SST files;

and then, on the driver: the SST files are ingested into fresh stores
``<base>/<store>/Partition_<N>`` with a local checkpoint at the last acknowledged changelog
offset (:func:`samzapy.spark.sst.ingest_store`), and each task's Kafka checkpoint is written
with that changelog offset (its input offsets and other stores' offsets kept). A job started
on the base directory finds a local checkpoint at its checkpointed offset: it replays nothing.

The job must be stopped while its state is written (its own writes would interleave). A
Spark task that is retried redoes steps 1-3 and converges on the same state. A store with
``rocksdb.ttl.ms`` is written too: the changelog gets the values, the SST files the values
with RocksDB's write time (the time of the write: :class:`samzapy.spark.sst.SstSink`).

Example::

    frame = spark.read.parquet("warehouse/user_counts")          # user STRING, n BIGINT
    write_state(frame.selectExpr("user AS key", "n AS value"), "job.properties", "counts")
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samzapy.config import Config, JobConfig
from samzapy.config.model import StoreConfig
from samzapy.operators.state_layout import KeyValueLayout, layout_for
from samzapy.spark import SparkJobError
from samzapy.spark.sst import SstSink, check_ingestible
from samzapy.spark.targets import RESULT_SCHEMA, PartitionStats, Target, ingest, result_schema

if TYPE_CHECKING:
    from samzapy.records import RecordSink

log = logging.getLogger(__name__)

#: Rows :func:`rewrite_partitions` takes: a null key marks a partition that gets no row (its
#: live keys are all deleted).
ENTRY_SCHEMA = "store STRING, partition INT, key BINARY, value BINARY"


@dataclass
class WriteStats:
    """What a state write did: per store partition, the keys and the changelog offset."""

    partitions: list[PartitionStats] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def keys(self) -> int:
        """Keys written (= entries in the new stores)."""
        return sum(p.sst_entries for p in self.partitions)

    @property
    def bytes(self) -> int:
        """Key + value bytes sent to the changelogs (tombstones included)."""
        return sum(p.bytes for p in self.partitions)


def write_state(
    frame: Any,
    config: str | Path | Config,
    store: str,
    *,
    key: str = "key",
    value: str = "value",
    raw: bool = False,
    base_dir: str | Path | None = None,
) -> WriteStats:
    """Make ``store`` of the job hold exactly the rows of ``frame`` (module doc).

    Args:
        frame: a DataFrame with one row per key.
        config: the job's .properties path or :class:`Config`.
        store: a logged RocksDB store of the job.
        key: the column holding the keys: objects the store's key serde writes, or with
            ``raw`` the stored bytes.
        value: the column holding the values: objects the store's msg serde writes (a struct
            column is written as a dict), or with ``raw`` the stored bytes.
        raw: the ``key`` and ``value`` columns hold the stored bytes (no serde).
        base_dir: where the local stores go (default: ``job.logged.store.base.dir``).

    Raises:
        SparkJobError: the store is not logged RocksDB with a key-value layout, a key appears
            twice, a value does not fit the serde, or the Spark job failed.
    """
    from samzapy.spark.state_data.read import job_of

    raw_config, job = job_of(config)
    target = _logged_store(job, store)
    layout = layout_for(raw_config, job, target)
    if not isinstance(layout, KeyValueLayout):
        msg = f"store '{store}' has a {type(layout).__name__}: only key-value stores are written from rows"
        raise SparkJobError(msg)
    tasks = task_count(job, target)
    encoded = frame.select(frame[key].alias("key"), frame[value].alias("value"))
    entries = encoded.mapInArrow(_Encoder(store, layout, tasks, raw), ENTRY_SCHEMA)
    base = Path(base_dir) if base_dir else job.logged_store_base_dir
    return rewrite_partitions(frame.sparkSession, entries, job, [target], tasks, base)


def _logged_store(job: JobConfig, name: str) -> StoreConfig:
    if name not in job.stores:
        msg = f"store '{name}' is not in the config: its stores are {', '.join(job.stores) or 'none'}"
        raise SparkJobError(msg)
    store = job.stores[name]
    if store.changelog is None:
        msg = f"store '{name}' has no changelog (stores.{name}.changelog): its state cannot be written"
        raise SparkJobError(msg)
    check_ingestible(store, ttl_ok=True)
    return store


def task_count(job: JobConfig, store: StoreConfig) -> int:
    """The job's task count: the changelog's partitions, else the most input partitions."""
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.broker import resolve_bootstrap_servers

    assert store.changelog is not None
    with TopicAdmin(resolve_bootstrap_servers(job.producer_bootstrap_servers)) as admin:
        count = admin.partition_count(store.changelog.stream)
        if count is not None:
            return count
        counts = [admin.partition_count(s.stream) for s in job.inputs]
        count = max((c for c in counts if c), default=0)
        if not count:
            msg = (
                f"neither the changelog of store '{store.name}' nor the job's inputs exist: "
                "create the input topics first (their partition count is the task count)"
            )
            raise SparkJobError(msg)
        # as the job would create it at its first start: one partition per task, compacted
        return admin.ensure_topic(store.changelog.stream, count, compact=True, expect_partitions=count)


class _Encoder:
    """Executor side of :func:`write_state`: (key, value) objects -> ENTRY_SCHEMA rows."""

    def __init__(self, store: str, layout: KeyValueLayout, tasks: int, raw: bool) -> None:
        self.store, self.layout, self.tasks, self.raw = store, layout, tasks, raw

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from samzapy.kafka.partitioner import partition_for_key

        schema = entry_arrow_schema()
        for batch in batches:
            out: dict[str, list[Any]] = {"store": [], "partition": [], "key": [], "value": []}
            for k, v in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist(), strict=True):
                key, value = (k, v) if self.raw else self.layout.encode(k, v)
                partition_key = self.layout.partition_key(key, value)
                assert partition_key is not None
                out["store"].append(self.store)
                out["partition"].append(partition_for_key(partition_key, self.tasks))
                out["key"].append(key)
                out["value"].append(value)
            yield pa.RecordBatch.from_pydict(out, schema=schema)


def entry_arrow_schema() -> Any:
    """The Arrow schema of :data:`ENTRY_SCHEMA`."""
    import pyarrow as pa

    fields = [("store", pa.string()), ("partition", pa.int32()), ("key", pa.binary()), ("value", pa.binary())]
    return pa.schema(fields)


def rewrite_partitions(
    spark: Any,
    entries: Any,
    job: JobConfig,
    stores: list[StoreConfig],
    tasks: int,
    base_dir: Path,
    *,
    checkpoints: bool = True,
) -> WriteStats:
    """Make partitions ``0..tasks-1`` of ``stores`` hold exactly ``entries``.

    Module doc, steps 1-3, ingest and, unless ``checkpoints`` is false, the task checkpoints;
    ``entries`` has :data:`ENTRY_SCHEMA`.
    """
    from samzapy.kafka.broker import resolve_bootstrap_servers
    from samzapy.spark.session import executor_error

    started = time.perf_counter()
    servers = resolve_bootstrap_servers(job.producer_bootstrap_servers)
    staging = base_dir / f".sst-staging-{uuid.uuid4().hex[:12]}"
    markers = spark.createDataFrame(
        [(s.name, p, None, None) for s in stores for p in range(tasks)], ENTRY_SCHEMA
    )
    ordered = (
        entries.unionByName(markers)
        .repartition(max(tasks * len(stores), 1), "store", "partition")
        .sortWithinPartitions("store", "partition", "key")
    )
    writer = _Rewriter({s.name: s for s in stores}, servers, str(staging))
    try:
        rows = ordered.mapInArrow(writer, RESULT_SCHEMA).collect()
    except Exception as exc:
        shutil.rmtree(staging, ignore_errors=True)
        msg = f"the state write failed: {executor_error(exc)}"
        raise SparkJobError(msg) from exc
    targets = [Target(s, p, None) for s in stores for p in range(tasks)]
    try:
        stats = WriteStats(ingest(targets, rows, base_dir, "shared", staging))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if checkpoints:
        write_checkpoints(job, servers, {(p.store, p.partition): p.offset for p in stats.partitions})
    stats.seconds = time.perf_counter() - started
    log.info(
        "state write: %d keys into %d store partitions, %.1f MB to the changelogs, in %.1fs",
        stats.keys,
        len(stats.partitions),
        stats.bytes / 1e6,
        stats.seconds,
    )
    return stats


def write_checkpoints(job: JobConfig, servers: str, offsets: dict[tuple[str, int], int | None]) -> None:
    """Set each task's checkpointed changelog offset of the written stores (the rest kept)."""
    from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoints
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.producer import Producer

    with TopicAdmin(servers) as admin:
        admin.ensure_topic(job.checkpoint_topic, 1, compact=True)
    current = read_checkpoints(servers, job.checkpoint_topic)
    producer = Producer(servers)
    try:
        writer = CheckpointWriter(producer, job.checkpoint_topic)
        for partition in sorted({p for _, p in offsets}):
            name = f"Partition {partition}"
            old = current.get(name) or TaskCheckpoint(name)
            changelogs = dict(old.changelog_offsets)
            changelogs |= {store: offset for (store, p), offset in offsets.items() if p == partition}
            writer.write(TaskCheckpoint(name, dict(old.input_offsets), changelogs, old.generation))
        producer.flush()
    finally:
        producer.close()


class _Rewriter:
    """Executor side of :func:`rewrite_partitions`.

    Sorted ENTRY_SCHEMA rows -> changelog records, SST files, and bulk_restore's result rows
    (``range`` with the last offset, ``file`` per SST).
    """

    def __init__(self, stores: dict[str, StoreConfig], servers: str, staging: str) -> None:
        self.stores, self.servers, self.staging = stores, servers, staging

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from samzapy.kafka.producer import Producer

        producer = Producer(self.servers)
        results: list[dict[str, Any]] = []
        current: _PartitionRewrite | None = None
        try:
            for batch in batches:
                columns = [batch.column(n).to_pylist() for n in ("store", "partition", "key", "value")]
                for store, partition, key, value in zip(*columns, strict=True):
                    if current is None or (store, partition) != (current.store.name, current.partition):
                        if current is not None:
                            results.extend(current.finish())
                        current = _PartitionRewrite(self.stores[store], partition, producer, self)
                    if key is not None:
                        current.put(key, value)
            if current is not None:
                results.extend(current.finish())
        finally:
            producer.close()
        if results:
            yield pa.RecordBatch.from_pylist(results, schema=result_schema())


class _PartitionRewrite:
    """One store partition being rewritten (module doc, steps 1-3)."""

    def __init__(self, store: StoreConfig, partition: int, producer: RecordSink, rewriter: _Rewriter) -> None:
        from samzapy.spark.state_data.read import latest_values

        assert store.changelog is not None
        self.store, self.partition, self.producer = store, partition, producer
        self.topic = store.changelog.stream
        self.servers = rewriter.servers
        self.live = latest_values(rewriter.servers, self.topic, partition, None)
        self.sink = SstSink(Path(rewriter.staging), store, partition, 0)
        self.previous: bytes | None = None
        self.records = self.bytes = self.keys = 0

    def put(self, key: bytes, value: bytes | None) -> None:
        if key == self.previous:
            msg = f"key {key!r} appears twice in the rows for store '{self.store.name}': give one row per key"
            raise SparkJobError(msg)
        self.previous = key
        if value is None:
            return  # a null value: the key is absent (its tombstone comes from the live keys)
        self.live.pop(key, None)
        self._send(key, value)
        self.sink.put(key, value)
        self.keys += 1

    def _send(self, key: bytes, value: bytes | None) -> None:
        self.producer.send(self.topic, key, value, partition=self.partition)
        self.records += 1
        self.bytes += len(key) + len(value or b"")

    def finish(self) -> list[dict[str, Any]]:
        for key in sorted(self.live):  # live keys not among the rows
            self._send(key, None)
        self.producer.flush()
        last = self.producer.acked_offset(self.topic, self.partition)
        if last is None:
            last = _last_offset(self.servers, self.topic, self.partition)
        rows: list[dict[str, Any]] = [
            {
                "kind": "range",
                "store": self.store.name,
                "partition": self.partition,
                "entries": self.keys,
                "records": self.records,
                "bytes": self.bytes,
                "first_offset": None,
                "last_offset": last,
            }
        ]
        for sst in self.sink.close():
            rows.append(
                {"kind": "file", "store": sst.store, "partition": sst.partition, "ord": sst.order}
                | {"path": sst.path, "entries": sst.entries}
            )
        return rows


def _last_offset(servers: str, topic: str, partition: int) -> int | None:
    """The offset of the last record of a partition (``None``: it is empty)."""
    from samzapy.kafka.reading import reader_consumer
    from samzapy.records import TopicPartition
    from samzapy.spark.kafka_source import true_end_offset

    consumer = reader_consumer(servers)
    try:
        tp = TopicPartition(topic, partition)
        end = true_end_offset(consumer, tp)
        return end - 1 if end > consumer.beginning_offsets([tp])[tp] else None
    finally:
        consumer.close()

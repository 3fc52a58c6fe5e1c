"""Bulk restore: every changelog partition of a job's stores, read in parallel by Spark.

The partitions are turned into sorted SST files and ingested into fresh RocksDB stores in the
job's layout.

The result is what the job's own sequential restore would build (same keys, same values),
plus the local checkpoint that restore trusts (``<dir>/<store>/Partition_<N>.checkpoints/
<offset>/`` with its ``OFFSET`` file, :mod:`samzapy.stores.checkpoints`), at the last
changelog offset read. A job started on the directory with a Kafka checkpoint at or after
that offset replays only the changelog after it (:mod:`samzapy.stores.restore`, step 1).

The Spark plan has no shuffle: the ``samzapy-kafka`` source gives one Spark partition per
changelog partition (or per offset range with ``max_records_per_range``), each is sorted by
(key, offset) in place (Spark's external sort: bigger than memory is fine), and the writer
keeps the last record of each key — a tombstone deletes it — writing SST files as it goes.
Split ranges write deletions too and are ingested oldest first, so later ranges win.

When the job keeps snapshots of a store in a blob store (``stores.<store>.backup.factories``
with ``blobstore``), each store partition starts from the newest complete snapshot usable for
it, downloaded and checked as the job's own restore does, and only the changelog after the
snapshot's offset is read (its tombstones written as deletions over the snapshot); a missing or
damaged snapshot falls back to the previous one, then to the whole changelog, with a log line
saying which (:func:`samzapy.spark.targets.from_snapshots`).

When every changelog partition holds at most ``in_memory_max_records`` records (and ranges
are not split), a leaner plan does the same in one Python pass per partition: the task reads
its partition from Kafka itself, keeps the last value of each key (in Arrow:
:mod:`samzapy.spark.restore.last_values`), sorts the keys and writes the SST files, with no rows
through Spark's JVM (about 3x less work per record, measured in
``benchmarks/bench_spark_restore.py``). Its memory is one partition's latest values, hence the
bound.

``to_checkpoint=True`` reads only up to the changelog offsets of the job's Kafka checkpoint
(the committed state). Records after it (uncommitted writes of a crashed run) are not
trimmed here: trimming writes to the changelog, which only the task that owns the
partition may do, and the job's restore trims at start anyway — it finds the local
checkpoint at exactly the committed offset, replays nothing and undoes the tail.
Without it, the stores reflect the changelog to its true end; a job whose Kafka checkpoint is
behind that end cannot use them (its restore deletes checkpoints ahead of its own) and
restores from scratch, so use ``to_checkpoint`` whenever the job may not have committed
everything it wrote. With ``to_checkpoint`` the checkpoint's changelog fence applies too: the
records a zombie container wrote after a takeover (a lower ownership generation, after the
offsets the checkpoint's generation claimed the task at) are left out, as the job's own
restore leaves them out (:class:`samzapy.checkpoint.ChangelogFence`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any, NamedTuple

from samzapy.checkpoint import GENERATION_HEADER, ChangelogFence
from samzapy.config import Config, JobConfig, load_config, parse_job_config
from samzapy.config.model import StoreConfig
from samzapy.spark import SparkJobError
from samzapy.spark.sst import HANDOFFS, SstSink, check_ingestible
from samzapy.spark.targets import (
    RESULT_SCHEMA,
    PartitionStats,
    Target,
    changelog_targets,
    from_snapshots,
    ingest,
    result_schema,
)

log = logging.getLogger(__name__)

#: A container restores a store partition with Spark only when its changelog backlog (the
#: records between its newest usable local checkpoint and the Kafka checkpoint) is at least this.
CONTAINER_BACKLOG_THRESHOLD = int(os.environ.get("SAMZAPY_SPARK_RESTORE_MIN_BACKLOG", "200000"))

#: The in-memory plan (module doc) is used when no changelog partition has more records.
IN_MEMORY_MAX_RECORDS = 2_000_000


@dataclass
class BulkRestoreStats:
    """Totals and timings of a bulk restore; ``spark_start_s`` is Spark's start-up alone."""

    partitions: list[PartitionStats] = field(default_factory=list)
    spark_start_s: float = 0.0
    spark_job_s: float = 0.0  # read + sort + SST writing in executors
    ingest_s: float = 0.0
    total_s: float = 0.0

    @property
    def records(self) -> int:
        """Changelog records read."""
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        """Key + value bytes read."""
        return sum(p.bytes for p in self.partitions)

    @property
    def sst_entries(self) -> int:
        """Entries written to SST files (the restored keys unless ranges were split)."""
        return sum(p.sst_entries for p in self.partitions)


def _job(config: str | Path | Config | JobConfig) -> JobConfig:
    if isinstance(config, JobConfig):
        return config
    raw = config if isinstance(config, Config) else load_config(config)
    return parse_job_config(raw)


def restore_stores(
    config: str | Path | Config | JobConfig,
    target_dir: str | Path,
    stores: list[str] | None = None,
    partitions: list[int] | None = None,
    to_checkpoint: bool = False,
    master: str | None = None,
    *,
    handoff: str = "shared",
    staging_dir: str | Path | None = None,
    max_records_per_range: int | None = None,
    in_memory_max_records: int = IN_MEMORY_MAX_RECORDS,
) -> BulkRestoreStats:
    """Restore the logged RocksDB stores of a job into ``target_dir`` with Spark (module doc).

    Args:
        config: the job's .properties path, its :class:`Config` or :class:`JobConfig`.
        target_dir: becomes ``<target_dir>/<store>/Partition_<N>`` (+ local checkpoints);
            existing store partitions there are replaced.
        stores: store names (default: every store with a changelog).
        partitions: task partitions (default: all of the changelog's).
        to_checkpoint: stop at the job's checkpointed changelog offsets (module doc).
        master: Spark master URL (default: spark-submit's, else ``local[*]``).
        handoff: ``shared`` or ``collect`` (:mod:`samzapy.spark.sst`).
        staging_dir: where executors write SST files in ``shared`` mode (default: a
            directory inside ``target_dir``; on a cluster: a path on storage every executor
            and the driver mount at the same place).
        max_records_per_range: split changelog partitions into offset ranges of this size.
        in_memory_max_records: use the in-memory plan (module doc) when no changelog
            partition has more records than this; 0: always Spark's sort.

    Raises:
        SparkJobError: a store cannot be bulk-restored or the Spark job failed.
    """
    started = time.perf_counter()
    job = _job(config)
    chosen = _stores(job, stores)
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
    targets = changelog_targets(job, chosen, partitions, to_checkpoint, servers)
    downloads = Path(target_dir) / f".snapshot-staging-{uuid.uuid4().hex[:12]}"  # same filesystem: moved
    try:
        targets = from_snapshots(job, targets, servers, downloads)
        return run_bulk_restore(
            targets,
            Path(target_dir),
            servers,
            master=master,
            handoff=handoff,
            staging_dir=staging_dir,
            max_records_per_range=max_records_per_range,
            in_memory_max_records=in_memory_max_records,
            started=started,
        )
    finally:
        shutil.rmtree(downloads, ignore_errors=True)


def _stores(job: JobConfig, names: list[str] | None) -> list[StoreConfig]:
    if names is None:
        chosen = [s for s in job.stores.values() if s.changelog is not None and s.engine == "rocksdb"]
    else:
        unknown = [n for n in names if n not in job.stores]
        if unknown:
            msg = f"unknown store(s) {', '.join(unknown)}: the job has {', '.join(job.stores) or 'none'}"
            raise SparkJobError(msg)
        chosen = [job.stores[n] for n in names]
    for store in chosen:
        if store.changelog is None:
            msg = f"store '{store.name}' has no changelog (stores.{store.name}.changelog): nothing to restore"
            raise SparkJobError(msg)
        check_ingestible(store)
    return chosen


def run_bulk_restore(
    targets: list[Target],
    target_dir: Path,
    servers: str,
    *,
    master: str | None = None,
    handoff: str = "shared",
    staging_dir: str | Path | None = None,
    max_records_per_range: int | None = None,
    in_memory_max_records: int = IN_MEMORY_MAX_RECORDS,
    started: float | None = None,
) -> BulkRestoreStats:
    """Read, sort and write ``targets`` with Spark, then ingest them under ``target_dir``."""
    from samzapy.spark.session import executor_error, get_spark

    if handoff not in HANDOFFS:
        msg = f"handoff '{handoff}' is not one of {', '.join(HANDOFFS)}"
        raise SparkJobError(msg)
    started = time.perf_counter() if started is None else started
    stats = BulkRestoreStats()
    staging = Path(staging_dir) if staging_dir else target_dir / f".sst-staging-{uuid.uuid4().hex[:12]}"
    # Nothing to read: an empty changelog range, or a snapshot at the range's last offset.
    readable = [
        t
        for t in targets
        if t.stop != 0 and not (t.start is not None and t.stop is not None and t.start >= t.stop)
    ]
    rows: list[Any] = []
    if readable:
        spark, stats.spark_start_s = get_spark(master, "samzapy-bulk-restore")
        job_started = time.perf_counter()
        if not max_records_per_range and _largest_range(readable, servers) <= in_memory_max_records:
            frame = _in_memory_plan(spark, readable, servers, handoff, str(staging))
        else:
            frame = _plan(spark, readable, servers, max_records_per_range, handoff, str(staging))
        try:
            rows = list(frame.toLocalIterator()) if handoff == "collect" else frame.collect()
        except Exception as exc:
            msg = f"the Spark restore failed: {executor_error(exc)}"
            raise SparkJobError(msg) from exc
        stats.spark_job_s = time.perf_counter() - job_started
    try:
        ingest_started = time.perf_counter()
        stats.partitions = ingest(targets, rows, target_dir, handoff, staging)
        stats.ingest_s = time.perf_counter() - ingest_started
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stats.total_s = time.perf_counter() - started
    log.info(
        "bulk restore: %d records (%.1f MB) into %d SST entries of %d store partitions in %.1fs "
        "(Spark start %.1fs, Spark job %.1fs, ingest %.1fs)",
        stats.records,
        stats.bytes / 1e6,
        stats.sst_entries,
        len(stats.partitions),
        stats.total_s,
        stats.spark_start_s,
        stats.spark_job_s,
        stats.ingest_s,
    )
    return stats


def _plan(
    spark: Any, targets: list[Target], servers: str, max_records: int | None, handoff: str, staging: str
) -> Any:
    by_topic: dict[str, list[Target]] = {}
    for target in targets:
        assert target.store.changelog is not None
        by_topic.setdefault(target.store.changelog.stream, []).append(target)
    frames = []
    for topic, group in by_topic.items():
        reader = (
            spark.read.format("samzapy-kafka")
            .option("bootstrap.servers", servers)
            .option("topic", topic)
            .option("partitions", ",".join(str(t.partition) for t in group))
            .option("includeHeaders", "true" if any(t.fence for t in group) else "false")
        )
        ending = {str(t.partition): t.stop for t in group if t.stop is not None}
        if ending:
            reader = reader.option("endingOffsets", json.dumps({topic: ending}))
        starting = {str(t.partition): t.start for t in group if t.start is not None}
        if starting:  # after a snapshot
            reader = reader.option("startingOffsets", json.dumps({topic: starting}))
        if max_records:
            reader = reader.option("maxRecordsPerPartition", str(max_records))
        frames.append(_fenced(reader.load(), group).select("topic", "partition", "offset", "key", "value"))
    frame = reduce(lambda a, b: a.unionAll(b), frames)
    stores = {t.store.changelog.stream: t.store for t in targets if t.store.changelog is not None}
    # split ranges, and ranges written over a snapshot, delete what a tombstone deletes
    deletes = max_records is not None or any(t.base is not None for t in targets)
    writer = _RangeWriter(stores, handoff, staging, write_deletes=deletes)
    return frame.sortWithinPartitions("topic", "partition", "key", "offset").mapInArrow(writer, RESULT_SCHEMA)


def _fenced(frame: Any, group: list[Target]) -> Any:
    """``frame`` with the key of every record the targets' fences rule out set to null.

    The fences are ``ChangelogFence.skips`` as a Spark expression over the
    ``samzapy.generation`` header: such a record is read and counted, but not restored, as a
    record without a key.
    """
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    fenced = [t for t in group if t.fence is not None]
    if not fenced:
        return frame
    header = f"try_element_at(filter(headers, h -> h.key = '{GENERATION_HEADER}'), 1).value"
    # no header (an older samzapy's record): never skipped, as if of the highest generation
    generation = F.coalesce(F.expr(f"cast(cast({header} as string) as bigint)"), F.lit(2**62))
    rules = []
    for target in fenced:
        start, fence_generation = target.fence_row()
        rules.append(
            (F.col("partition") == target.partition)
            & (F.col("offset") > start)
            & (generation < fence_generation)
        )
    skipped = reduce(lambda a, b: a | b, rules)
    return frame.withColumn("key", F.when(skipped, F.lit(None).cast("binary")).otherwise(F.col("key")))


def _largest_range(targets: list[Target], servers: str) -> int:
    """The most records any target's changelog range can hold (offsets from its start)."""
    from samzapy.kafka.offsets import beginning_offsets, end_offsets
    from samzapy.kafka.reading import reader_consumer
    from samzapy.records import TopicPartition

    tps = {t: TopicPartition(t.store.changelog.stream, t.partition) for t in targets if t.store.changelog}
    consumer = reader_consumer(servers)
    try:
        starts = beginning_offsets(consumer, list(tps.values()))  # several topics: see samzapy.kafka.offsets
        ends = end_offsets(consumer, list(tps.values()))
    finally:
        consumer.close()
    # The dev broker's end offset can be short of the true end by one batch: a stop offset,
    # when known, is exact; otherwise pad by a batch's worth, which only matters at the bound.
    sizes = [(t.stop if t.stop is not None else ends[tp] + 10_000) - starts[tp] for t, tp in tps.items()]
    return max(sizes, default=0)


def _in_memory_plan(spark: Any, targets: list[Target], servers: str, handoff: str, staging: str) -> Any:
    ranges = []
    for t in targets:
        assert t.store.changelog is not None  # targets are logged stores (changelog_targets)
        start, stop = -1 if t.start is None else t.start, -1 if t.stop is None else t.stop
        ranges.append((t.store.changelog.stream, t.partition, start, stop, *t.fence_row()))
    stores = {t.store.changelog.stream: t.store for t in targets if t.store.changelog is not None}
    # An RDD job, not a DataFrame one: no query to plan and no Arrow conversion in the JVM,
    # which were most of a job's fixed cost (about 0.4 s of CPU per job on two cores).
    ranges_rdd = spark.sparkContext.parallelize(ranges, len(ranges))
    return ranges_rdd.mapPartitions(_PartitionReader(stores, servers, handoff, staging))


class _PartitionReader:
    """The executor side of the in-memory plan: (topic, partition, start, stop, fence) tuples -> SST files.

    Each partition is read from Kafka (without the records the fence rules out), its last value
    per key sorted into SST files + stats rows (dicts of :data:`RESULT_SCHEMA`'s fields; a range
    from a snapshot's offset on, ``start`` >= 0, also writes its tombstones as deletions).
    """

    def __init__(self, stores: dict[str, StoreConfig], servers: str, handoff: str, staging: str) -> None:
        self.stores = stores
        self.servers = servers
        self.handoff = handoff
        self.staging = staging

    def __call__(self, ranges: Iterator[tuple[str, int, int, int, int, int]]) -> Iterator[dict[str, Any]]:
        from samzapy.kafka.reading import read_partition, reader_consumer
        from samzapy.records import TopicPartition
        from samzapy.spark.sst import executor_dir
        from samzapy.stores.restore import cyclic_gc_paused

        directory = executor_dir(self.handoff, self.staging)
        results: list[dict[str, Any]] = []
        consumer = reader_consumer(self.servers, native_records=True)  # the cheapest records
        try:
            for topic, partition, first, stop, fence_start, fence_gen in ranges:
                tp = TopicPartition(topic, partition)
                start = max(consumer.beginning_offsets([tp])[tp], first)
                records = read_partition(consumer, tp, start, None if stop < 0 else stop)
                if fence_gen:
                    records = _keyless_if_fenced(records, ChangelogFence(fence_start, fence_gen))
                state = _RangeState(self.stores[topic], topic, partition, directory, deletes=first >= 0)
                with cyclic_gc_paused():  # as the sequential restore: see stores/restore.py
                    state.add_unsorted(records)
                results.extend(state.finish(self.handoff))
        finally:
            consumer.close()
        yield from results
        if self.handoff == "collect":
            shutil.rmtree(directory, ignore_errors=True)


def _keyless_if_fenced(batches: Iterator[list[Any]], fence: ChangelogFence) -> Iterator[list[Any]]:
    """``batches`` with the key of every record ``fence`` rules out removed.

    Such a record is read and counted, but not restored (restore ignores records without a key).
    The records may be the decoder's own objects (``native_records``), not tuples: a skipped
    one is replaced by a keyless tuple with the same four fields.
    """
    for batch in batches:
        yield [_Keyless(r.offset, None, r.value, r.headers) if fence.skips(r) else r for r in batch]


class _Keyless(NamedTuple):
    """A record the fence rules out: counted, not restored (``key`` is ``None``)."""

    offset: int
    key: None
    value: bytes | None
    headers: Any


class _RangeWriter:
    """The executor side: sorted rows of changelog ranges -> SST files + one stats row per range."""

    def __init__(
        self, stores: dict[str, StoreConfig], handoff: str, staging: str, write_deletes: bool
    ) -> None:
        self.stores = stores
        self.handoff = handoff
        self.staging = staging
        self.write_deletes = write_deletes

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from samzapy.spark.sst import executor_dir

        directory = executor_dir(self.handoff, self.staging)
        results: list[dict[str, Any]] = []
        state: _RangeState | None = None
        for batch in batches:
            columns = [
                batch.column(name).to_pylist() for name in ("topic", "partition", "offset", "key", "value")
            ]
            for topic, partition, offset, key, value in zip(*columns, strict=True):
                if state is None or (topic, partition) != (state.topic, state.partition):
                    if state is not None:
                        results.extend(state.finish(self.handoff))
                    state = _RangeState(self.stores[topic], topic, partition, directory, self.write_deletes)
                state.add(offset, key, value)
        if state is not None:
            results.extend(state.finish(self.handoff))
        if results:
            yield pa.RecordBatch.from_pylist(results, schema=result_schema())
        if self.handoff == "collect":
            shutil.rmtree(directory, ignore_errors=True)


class _RangeState:
    """One changelog range being written: the last record per key wins."""

    def __init__(
        self, store: StoreConfig, topic: str, partition: int, directory: Path, deletes: bool
    ) -> None:
        self.store, self.topic, self.partition = store, topic, partition
        self.directory = directory
        self.deletes = deletes
        self.sink: SstSink | None = None
        self.records = self.bytes = self.keys = 0
        self.first: int | None = None
        self.last = -1
        self._key: bytes | None = None
        self._value: bytes | None = None

    def add(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        self.records += 1
        self.bytes += len(key or b"") + len(value or b"")
        self.first = offset if self.first is None else min(self.first, offset)
        self.last = max(self.last, offset)
        if key is None:
            return  # restore ignores records without a key
        if key != self._key:
            self._flush_key()
            self._key = key
        self._value = value

    def add_unsorted(self, batches: Iterable[list[Any]]) -> None:
        """A whole range at once, in offset order (not sorted by key).

        The last value of each key is kept in memory, then written in key order.
        """
        from samzapy.spark.restore.last_values import LastValues

        latest = LastValues()  # the per-key reduction in Arrow, not in a dict: see its module
        for batch in batches:
            if not batch:
                continue
            self.first = batch[0].offset if self.first is None else self.first
            self.last = batch[-1].offset
            self.records += len(batch)
            latest.add(batch)
        self.bytes += latest.bytes
        keys, values = latest.sorted_items()
        if keys:
            if self.sink is None:
                self.sink = SstSink(self.directory, self.store, self.partition, self.first or 0)
            self.keys += self.sink.write_sorted(keys, values, deletes=self.deletes)
        self._key = None

    def _flush_key(self) -> None:
        if self._key is None:
            return
        if self.sink is None:
            self.sink = SstSink(self.directory, self.store, self.partition, self.first or 0)
        if self._value is not None:
            self.sink.put(self._key, self._value)
            self.keys += 1
        elif self.deletes:
            self.sink.delete(self._key)

    def finish(self, handoff: str) -> list[dict[str, Any]]:
        from samzapy.spark.sst import file_chunks

        self._flush_key()
        files = self.sink.close() if self.sink is not None else []
        rows = [
            {
                "kind": "range",
                "store": self.store.name,
                "partition": self.partition,
                "entries": self.keys,
                "records": self.records,
                "bytes": self.bytes,
                "first_offset": self.first,
                "last_offset": self.last,
            }
        ]
        for sst in files:
            common = {"kind": "file", "store": sst.store, "partition": sst.partition, "ord": sst.order}
            common |= {"path": sst.path, "entries": sst.entries}
            if handoff == "collect":
                rows.extend({**common, "chunk": i, "data": data} for i, data in file_chunks(sst.path))
            else:
                rows.append(common)
        return rows


def restore_for_container(
    job: JobConfig, partitions: list[int], checkpoints: dict[str, Any]
) -> BulkRestoreStats | None:
    """The container's hook for ``stores.S.restore.engine=spark``.

    Before its tasks restore, bulk-restore the store partitions whose changelog backlog is
    large. Returns what the bulk restore did, ``None`` when no partition needed it.

    For every such store and task partition with a checkpointed changelog offset K, the
    newest local checkpoint at or below K is looked up; when the records between it and K
    number at least :data:`CONTAINER_BACKLOG_THRESHOLD` (or there is none), the partition is
    rebuilt by Spark up to K (``to_checkpoint``, fenced by the checkpoint as the job's own
    restore is). When the store restores from blob-store snapshots
    (``stores.<store>.restore.factories``, or its backup factories, naming ``blobstore``), the
    partition starts from the newest usable snapshot at or before K and Spark reads only the
    changelog after it, as :func:`restore_stores` does (:func:`~samzapy.spark.targets.from_snapshots`).
    The container's own restore then finds a local checkpoint at K, replays nothing and trims
    the uncommitted tail as usual.
    """
    from samzapy.kafka.broker import resolve_bootstrap_servers
    from samzapy.stores.checkpoints import LocalCheckpoints
    from samzapy.stores.factory import store_dir

    targets = []
    for store in job.stores.values():
        if store.restore_engine != "spark" or store.changelog is None:
            continue
        check_ingestible(store)
        for partition in partitions:
            checkpoint = checkpoints.get(f"Partition {partition}")
            k = checkpoint.changelog_offsets.get(store.name) if checkpoint else None
            if checkpoint is None or k is None:
                continue
            live = store_dir(job.logged_store_base_dir, store.name, partition)
            local = [
                c.offset for c in LocalCheckpoints(live, store.changelog.stream, partition).newest_first()
            ]
            base = max((o for o in local if o <= k), default=-1)
            if k - base < CONTAINER_BACKLOG_THRESHOLD:
                continue
            targets.append(Target(store, partition, k + 1, checkpoint.fence_for(store.name)))
    if not targets:
        return None
    log.info(
        "restoring %d store partitions with Spark (backlog >= %d records each)",
        len(targets),
        CONTAINER_BACKLOG_THRESHOLD,
    )
    servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
    base_dir = Path(job.logged_store_base_dir)
    downloads = base_dir / f".snapshot-staging-{uuid.uuid4().hex[:12]}"  # same filesystem: moved
    try:
        targets = from_snapshots(job, targets, servers, downloads)
        return run_bulk_restore(targets, base_dir, servers)
    finally:
        shutil.rmtree(downloads, ignore_errors=True)

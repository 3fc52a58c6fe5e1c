"""Read a job's state as a Spark DataFrame: one row per live key of a store.

Two sources, the same rows:

- ``source="changelog"`` (default): every changelog partition is read in parallel (one Spark
  task each, kafka-python in the executor), the last value per key kept, tombstones dropped;
  up to each task's checkpointed changelog offset with ``to_checkpoint=True`` (the committed
  state), else to the changelog's true end.
- ``source="disk"``: the stores under a base directory (``<dir>/<store>/Partition_<N>``, the
  job's ``job.logged.store.base.dir`` by default), opened as RocksDB secondary instances: a
  running job's stores can be read. The directory must be visible to the executors (always
  in ``local[*]``; a shared mount on a cluster).

Columns: ``store, task, partition``, then the layout's (:mod:`samzapy.operators.state_layout`):
``key`` (typed from the JSON of the decoded key), for window stores ``kind, window_start,
window_end, aggregate``; the value's fields as columns when the values are JSON/Avro records
(a field named like a column above becomes ``value_<name>``), else one ``value`` column. The
operators' other stores (joins, dedup, versioned tables) add ``kind`` after ``partition`` and
show each entry's fields as columns (null where an entry of another kind has none).
``raw=True`` adds ``key_bytes`` and ``value_bytes``, the stored bytes (for a store with
``rocksdb.ttl.ms``, without the write time RocksDB appends on disk: the value the job reads).

Example::

    df = read_state(spark, "config/profile-settings-join.properties", "joined")
    df.filter("zip = '10115'").show()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from samzapy.config import Config, JobConfig, load_config, parse_job_config
from samzapy.config.model import StoreConfig
from samzapy.operators.state_layout import ROW_FIELDS, KeyValueLayout, Layout, layout_for
from samzapy.operators.window_layout import WindowLayout
from samzapy.spark import SparkJobError
from samzapy.spark.state_data.progress import SparkProgress, planned_records
from samzapy.store_codec import serde_kind

if TYPE_CHECKING:
    from samzapy.checkpoint import ChangelogFence

log = logging.getLogger(__name__)

#: Rows of the executors' raw read (before the JSON columns are typed).
RAW_SCHEMA = (
    "store STRING, task STRING, partition INT, key_bytes BINARY, value_bytes BINARY, kind STRING, "
    "key_json STRING, window_start BIGINT, window_end BIGINT, value_json STRING"
)
_ROWS_PER_BATCH = 10_000
SOURCES = ("changelog", "disk")


@dataclass(frozen=True)
class StateSource:
    """One store partition to read.

    From its changelog (``topic``, ``stop`` exclusive, ``None``: true end;
    ``fence_start``/``fence_generation``: the checkpoint's changelog fence, whose ruled-out
    records, a zombie's, are skipped) or from a directory on disk (``path``).
    """

    store: str
    partition: int
    topic: str | None = None
    stop: int | None = None
    path: str | None = None
    fence_start: int | None = None
    fence_generation: int | None = None

    def fence(self) -> Any:
        """The :class:`samzapy.checkpoint.ChangelogFence` to read with (``None``: none)."""
        from samzapy.checkpoint import ChangelogFence

        if self.fence_generation is None:
            return None
        return ChangelogFence(self.fence_start, self.fence_generation)


def job_of(config: str | Path | Config) -> tuple[Config, JobConfig]:
    """The raw and parsed configuration of a job."""
    raw = config if isinstance(config, Config) else load_config(config)
    return raw, parse_job_config(raw)


def read_state(
    spark: Any,
    config: str | Path | Config,
    store: str,
    *,
    source: str = "changelog",
    path: str | Path | None = None,
    to_checkpoint: bool = False,
    partitions: list[int] | None = None,
    raw: bool = False,
    progress: TextIO | None = None,
) -> Any:
    """One row per live key of ``store`` (module doc) as a DataFrame.

    Args:
        spark: the SparkSession (:func:`samzapy.spark.session.get_spark` gives one).
        config: the job's .properties path or its :class:`Config`.
        store: the store's name.
        source: ``changelog`` or ``disk``.
        path: with ``disk``, the base directory (default: ``job.logged.store.base.dir``).
        to_checkpoint: with ``changelog``, stop at each task's checkpointed changelog offset.
        partitions: only these tasks (default: all).
        raw: add the stored bytes as ``key_bytes`` and ``value_bytes``.
        progress: where the read's progress lines go (records, MB, rate, ETA; default: the
            log at INFO): :mod:`samzapy.spark.state_data.progress`.

    Raises:
        SparkJobError: unknown store or source, no changelog, nothing on disk.
    """
    raw_config, job = job_of(config)
    store_config = _store(job, store)
    layout = layout_for(raw_config, job, store_config)
    if source == "changelog":
        sources = changelog_sources(job, store_config, partitions, to_checkpoint)
    elif source == "disk":
        sources = disk_sources(Path(path) if path else job.logged_store_base_dir, store_config, partitions)
    else:
        msg = f"source '{source}' is not one of {', '.join(SOURCES)}"
        raise SparkJobError(msg)
    with SparkProgress(spark, f"read_state {store}", planned(job, sources), progress) as shown:
        frame = raw_frame(spark, job, {store: layout}, sources, shown.counters)
        # typing the columns reads everything once (into Spark's cache): the progress is that read
        windowed = isinstance(layout, WindowLayout)
        keyed = isinstance(layout, KeyValueLayout)  # serdes alone say the columns' types
        serdes = (store_config.key_serde, store_config.msg_serde) if keyed else (None, None)
        known = (serde_kind(job, serdes[0]), serde_kind(job, serdes[1]))
        return typed_frame(spark, frame, raw, windowed=windowed, kinds=known, kind_column=not keyed)


def planned(job: JobConfig, sources: list[StateSource]) -> int | None:
    """Changelog records the sources hold (``None`` for stores on disk: unknown)."""
    from samzapy.kafka.broker import resolve_bootstrap_servers

    ranges = [(s.topic, s.partition, s.stop) for s in sources if s.topic is not None]
    if len(ranges) < len(sources):
        return None
    return planned_records(resolve_bootstrap_servers(job.consumer_bootstrap_servers), ranges)


def _store(job: JobConfig, name: str) -> StoreConfig:
    if name not in job.stores:
        msg = f"store '{name}' is not in the config: its stores are {', '.join(job.stores) or 'none'}"
        raise SparkJobError(msg)
    return job.stores[name]


def changelog_sources(
    job: JobConfig, store: StoreConfig, partitions: list[int] | None, to_checkpoint: bool
) -> list[StateSource]:
    """The changelog partitions of ``store`` to read, with their stop offsets."""
    from samzapy.kafka.broker import resolve_bootstrap_servers
    from samzapy.spark.targets import changelog_targets

    if store.changelog is None:
        msg = f"store '{store.name}' has no changelog (stores.{store.name}.changelog): read it from disk"
        raise SparkJobError(msg)
    servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
    targets = changelog_targets(job, [store], partitions, to_checkpoint, servers)
    topic = store.changelog.stream
    return [
        StateSource(
            store.name,
            t.partition,
            topic,
            t.stop,
            fence_start=None if t.fence is None else t.fence.start,
            fence_generation=None if t.fence is None else t.fence.generation,
        )
        for t in targets
    ]


def disk_sources(base: Path, store: StoreConfig, partitions: list[int] | None) -> list[StateSource]:
    """The ``Partition_<N>`` directories of ``store`` under ``base``."""
    from samzapy.ondisk.secondary import locate

    try:
        found = locate(base, store.name)
    except Exception as exc:  # BadInputError: the message names the directory
        raise SparkJobError(str(exc)) from exc
    chosen = [(loc.partition, loc.path) for loc in found if loc.partition is not None]
    if partitions is not None:
        chosen = [(partition, path) for partition, path in chosen if partition in set(partitions)]
    return [StateSource(store.name, partition, path=str(path.resolve())) for partition, path in chosen]


def raw_frame(
    spark: Any,
    job: JobConfig,
    layouts: dict[str, Layout],
    sources: list[StateSource],
    counters: tuple[Any, Any] | None = None,
) -> Any:
    """The rows of :data:`RAW_SCHEMA`.

    Each source read by one Spark task; records and bytes read are added to ``counters`` (Spark
    accumulators) when given.
    """
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
    ttl = {name: job.stores[name].ttl_ms is not None for name in layouts}
    rows = [
        (s.store, s.partition, s.topic, s.stop, s.path, s.fence_start, s.fence_generation) for s in sources
    ]
    schema = (
        "store STRING, partition INT, topic STRING, stop BIGINT, path STRING, "
        "fence_start BIGINT, fence_generation BIGINT"
    )
    frame = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(len(rows), 1)), schema)
    return frame.mapInArrow(SourceReader(layouts, servers, ttl, counters), RAW_SCHEMA)


class SourceReader:
    """The executor side: (store, partition, topic, stop, path) rows -> live entries.

    The live entries of each source, decoded by the store's layout, in key order.
    """

    def __init__(
        self,
        layouts: dict[str, Layout],
        servers: str,
        ttl: dict[str, bool],
        counters: tuple[Any, Any] | None = None,
    ) -> None:
        self.layouts = layouts
        self.servers = servers
        self.ttl = ttl
        self.counters = counters

    def _count(self, records: int, size: int) -> None:
        if self.counters is not None:
            self.counters[0].add(records)
            self.counters[1].add(size)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The entries of each source row of ``batches``, as Arrow batches of :data:`RAW_SCHEMA`."""
        for batch in batches:
            for row in batch.to_pylist():
                source = StateSource(**row)
                yield from self._batches(source, self._entries(source))

    def _entries(self, source: StateSource) -> Iterator[tuple[bytes, bytes]]:
        if source.path is not None:
            return self._counted(disk_entries(source.path, self.ttl[source.store]))
        assert source.topic is not None
        latest = latest_values(
            self.servers, source.topic, source.partition, source.stop, self._count, source.fence()
        )
        return iter(sorted(latest.items()))

    def _counted(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        for key, value in entries:
            self._count(1, len(key) + len(value))
            yield key, value

    def _batches(self, source: StateSource, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[Any]:
        import pyarrow as pa

        schema = raw_arrow_schema()
        layout = self.layouts[source.store]
        rows: list[dict[str, Any]] = []
        task = f"Partition {source.partition}"
        for key, value, following in with_following(entries):
            row = {"store": source.store, "task": task, "partition": source.partition}
            row |= {"key_bytes": key, "value_bytes": value, **layout.decode(key, value, following)}
            rows.append(row)
            if len(rows) >= _ROWS_PER_BATCH:
                yield pa.RecordBatch.from_pylist(rows, schema=schema)
                rows = []
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)


def with_following(
    entries: Iterator[tuple[bytes, bytes]],
) -> Iterator[tuple[bytes, bytes, bytes | None]]:
    """Each entry with the key of the next one (``None`` after the last).

    A versioned table's version ends where the next version of its key starts.

    >>> list(with_following(iter([(b"a", b"1"), (b"b", b"2")])))
    [(b'a', b'1', b'b'), (b'b', b'2', None)]
    """
    previous: tuple[bytes, bytes] | None = None
    for entry in entries:
        if previous is not None:
            yield previous[0], previous[1], entry[0]
        previous = entry
    if previous is not None:
        yield previous[0], previous[1], None


def raw_arrow_schema() -> Any:
    """The Arrow schema of :data:`RAW_SCHEMA`."""
    import pyarrow as pa

    text, binary, i32, i64 = pa.string(), pa.binary(), pa.int32(), pa.int64()
    names = ["store", "task", "partition", "key_bytes", "value_bytes", *ROW_FIELDS]
    types = [text, text, i32, binary, binary, text, text, i64, i64, text]
    return pa.schema(list(zip(names, types, strict=True)))


def latest_values(
    servers: str,
    topic: str,
    partition: int,
    stop: int | None,
    on_batch: Callable[[int, int], None] | None = None,
    fence: ChangelogFence | None = None,
) -> dict[bytes, bytes]:
    """The last value per key of a changelog partition up to ``stop``.

    ``stop`` is exclusive (``None``: the true end); tombstones are applied, the records
    ``fence`` (a ``ChangelogFence``) rules out skipped; ``on_batch(records, bytes)`` is called
    after each batch read.
    """
    from samzapy.kafka.reading import read_partition, reader_consumer
    from samzapy.records import TopicPartition

    latest: dict[bytes, bytes | None] = {}
    consumer = reader_consumer(servers)
    try:
        tp = TopicPartition(topic, partition)
        start = consumer.beginning_offsets([tp])[tp]
        for batch in read_partition(consumer, tp, start, stop):
            size = 0
            for record in batch:
                size += max(record.serialized_key_size, 0) + max(record.serialized_value_size, 0)
                # restore ignores records without a key, and those a zombie wrote
                if record.key is not None and (fence is None or not fence.skips(record)):
                    latest[record.key] = record.value
            if on_batch is not None:
                on_batch(len(batch), size)
    finally:
        consumer.close()
    return {k: v for k, v in latest.items() if v is not None}


def disk_entries(path: str, ttl: bool) -> Iterator[tuple[bytes, bytes]]:
    """Every entry of one store partition on disk (a secondary instance: no lock taken)."""
    from samzapy.ondisk.secondary import DbLocation, SecondaryDb

    with SecondaryDb(DbLocation(None, Path(path)), ttl=ttl) as db:
        yield from db.entries()


def typed_frame(
    spark: Any,
    frame: Any,
    raw: bool,
    windowed: bool = False,
    kinds: tuple[str | None, str | None] = (None, None),
    kind_column: bool = False,
) -> Any:
    """The raw rows with typed ``key`` and value columns (module doc).

    The rows are read once here, into Spark's cache; a column of a serde ``kinds`` names
    (string, integer, long) has its type from the serde, the others are inferred from their JSON
    texts. ``kind_column``: the rows' ``kind`` is a column (always so for windows).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    started = time.perf_counter()
    frame.count()  # the read pass (what the progress shows); the inferences below use the cache
    windows = frame.filter(F.col("kind") != "internal") if windowed else frame
    key_type = _known_type(kinds[0]) or _json_type(spark, frame, "key_json")
    value_type = _known_type(kinds[1]) or _json_type(spark, windows, "value_json")
    log.info("state columns typed in %.1fs", time.perf_counter() - started)
    columns = [F.col("store"), F.col("task"), F.col("partition")]
    if windowed or kind_column:
        columns.append(F.col("kind"))
    columns.append(_parse("key_json", key_type).alias("key"))
    if windowed:
        internal = F.col("kind") == "internal"
        aggregate = F.when(~internal, _parse("value_json", value_type)).alias("aggregate")
        # the task's own entries (watermarks, dedup, counters): their value as escaped text
        value = F.when(internal, F.get_json_object(F.col("value_json"), "$")).alias("value")
        columns += [F.col("window_start"), F.col("window_end"), aggregate, value]
    else:
        columns += _value_columns(value_type, {"store", "task", "partition", "key", "kind"})
    if raw:
        columns += [F.col("key_bytes"), F.col("value_bytes")]
    return frame.select(*columns)


def _known_type(kind: str | None) -> Any:
    """The Spark type of the values of a serde kind, when the kind alone says it."""
    from pyspark.sql.types import LongType, StringType

    return {"string": StringType(), "integer": LongType(), "long": LongType()}.get(kind or "")


def _json_type(spark: Any, frame: Any, column: str) -> Any:
    """The Spark type of the JSON texts in ``column`` (strings when there are none)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    wrapped = frame.select(F.concat(F.lit('{"v":'), F.col(column), F.lit("}")).alias("j"))
    inferred = spark.read.json(wrapped)
    if "v" not in inferred.columns:
        return StringType()
    return inferred.schema["v"].dataType


def _parse(column: str, data_type: Any) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField("v", data_type)])
    wrapped = F.concat(F.lit('{"v":'), F.col(column), F.lit("}"))
    return F.from_json(wrapped, schema).getField("v")


def _value_columns(value_type: Any, taken: set[str]) -> list[Any]:
    from pyspark.sql.types import StructType

    parsed = _parse("value_json", value_type)
    if not isinstance(value_type, StructType):
        return [parsed.alias("value")]
    return [
        parsed.getField(f.name).alias(f"value_{f.name}" if f.name in taken else f.name)
        for f in value_type.fields
    ]

"""``samzapy-kafka``: a PySpark Python data source that reads Kafka topics with kafka-python.

There is no Spark Kafka connector jar on these machines, so Spark reads Kafka through this
source: the driver plans one input partition per Kafka partition (or per offset range of a
large one), each executor reads its range with its own kafka-python consumer and hands Spark
Arrow record batches.

Options (all strings, as Spark passes them):

============================ ==========================================================
``bootstrap.servers``        required
``topic``                    required; several topics separated by commas
``partitions``               ``0,2,3`` (default: every partition of every topic)
``startingOffsets``          ``earliest`` (default) or JSON ``{"topic": {"0": 42}}``
``endingOffsets``            ``latest`` (default: the TRUE end, see below) or JSON as above;
                             ``-1`` for one partition means its true end
``maxRecordsPerPartition``   split a partition into offset ranges of at most this many
                             offsets (default: no split)
``includeHeaders``           ``true`` (default) or ``false`` (an empty list then)
============================ ==========================================================

Rows: ``topic, partition, offset, key (binary), value (binary, null for a tombstone),
timestamp (ms), headers (array<struct<key, value>>)``, in offset order within each Spark
partition.

"Latest" is the partition's true end, not the broker's reported end offset, which the dev
broker undercounts (DESIGN §10): the last range reads until a fetch at its position comes
back empty (:func:`samzapy.kafka.reading.read_partition`). The dev broker's
``offsets_for_times`` is wrong too (it returns 0), so :func:`offset_for_time` finds a
timestamp's offset by binary search over reads instead.

Example::

    spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("samzapy-kafka")
          .option("bootstrap.servers", "localhost:9092").option("topic", "pageviews").load())
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from samzapy.kafka.reading import end_offset, read_partition, reader_consumer

if TYPE_CHECKING:
    from samzapy.kafka.consumer import Consumer
    from samzapy.records import TopicPartition

SCHEMA = (
    "topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY, timestamp BIGINT, "
    "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 10_000
#: An end or stop offset meaning "the partition's true end".
LATEST = -1


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One input partition: offsets ``start`` to ``stop`` (exclusive; ``None``: true end)."""

    topic: str
    partition: int
    start: int
    stop: int | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", (self.topic, self.partition, self.start, self.stop))


class KafkaDataSource(DataSource):
    """The ``samzapy-kafka`` data source (module doc)."""

    @classmethod
    def name(cls) -> str:
        """The format name for ``spark.read.format(...)``."""
        return "samzapy-kafka"

    def schema(self) -> str:
        """The row schema (module doc)."""
        return SCHEMA

    def reader(self, schema: Any) -> KafkaReader:
        """A reader over the configured topics and offsets."""
        return KafkaReader(dict(self.options))


def _offsets_option(text: str | None, default: str) -> dict[str, dict[int, int]] | str:
    text = (text or default).strip()
    if text in ("earliest", "latest"):
        return text
    try:
        parsed = json.loads(text)
        return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in parsed.items()}
    except (ValueError, AttributeError) as exc:
        msg = (
            f"offsets option must be 'earliest', 'latest' or JSON {{\"topic\": {{\"0\": 42}}}}, not {text!r}"
        )
        raise ValueError(msg) from exc


class KafkaReader(DataSourceReader):
    """Plans offset ranges on the driver (:meth:`partitions`) and reads them in executors."""

    def __init__(self, options: dict[str, str]) -> None:
        lower = {k.lower(): v for k, v in options.items()}
        try:
            self.servers = lower["bootstrap.servers"]
            self.topics = [t.strip() for t in lower["topic"].split(",") if t.strip()]
        except KeyError as exc:
            msg = f"the samzapy-kafka data source needs the option {exc.args[0]!r}"
            raise ValueError(msg) from None
        wanted = lower.get("partitions")
        self.partition_filter = None if not wanted else {int(p) for p in wanted.split(",")}
        self.starting = _offsets_option(lower.get("startingoffsets"), "earliest")
        self.ending = _offsets_option(lower.get("endingoffsets"), "latest")
        max_records = lower.get("maxrecordsperpartition")
        self.max_records = int(max_records) if max_records else None
        self.include_headers = lower.get("includeheaders", "true").lower() == "true"

    def partitions(self) -> list[OffsetRange]:
        """One range per Kafka partition, split by ``maxRecordsPerPartition`` when set."""
        from samzapy.records import TopicPartition

        consumer = reader_consumer(self.servers)
        try:
            ranges: list[OffsetRange] = []
            for topic in self.topics:
                found = consumer.partitions_for_topic(topic)
                if not found:
                    msg = f"topic '{topic}' does not exist on {self.servers}"
                    raise ValueError(msg)
                for partition in sorted(found):
                    if self.partition_filter is not None and partition not in self.partition_filter:
                        continue
                    tp = TopicPartition(topic, partition)
                    start = self._start(consumer, tp)
                    stop = self._stop(tp)
                    ranges.extend(self._split(consumer, tp, start, stop))
            return ranges
        finally:
            consumer.close()

    def _start(self, consumer: Consumer, tp: TopicPartition) -> int:
        if isinstance(self.starting, dict) and tp.partition in self.starting.get(tp.topic, {}):
            return self.starting[tp.topic][tp.partition]
        return consumer.beginning_offsets([tp])[tp]

    def _stop(self, tp: TopicPartition) -> int | None:
        if isinstance(self.ending, dict):
            stop = self.ending.get(tp.topic, {}).get(tp.partition, LATEST)
            return None if stop == LATEST else stop
        return None

    def _split(
        self, consumer: Consumer, tp: TopicPartition, start: int, stop: int | None
    ) -> list[OffsetRange]:
        if self.max_records is None:
            return [OffsetRange(tp.topic, tp.partition, start, stop)]
        known_end = stop if stop is not None else end_offset(consumer, tp)
        ranges = []
        low = start
        while known_end - low > self.max_records:
            ranges.append(OffsetRange(tp.topic, tp.partition, low, low + self.max_records))
            low += self.max_records
        ranges.append(OffsetRange(tp.topic, tp.partition, low, stop))  # the last one: to stop or true end
        return ranges

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Arrow record batches of the range's records, in offset order."""
        topic, number, start, stop = partition.value
        yield from read_range_batches(self.servers, topic, number, start, stop, self.include_headers)


def arrow_schema() -> Any:
    """The Arrow schema of the rows (:data:`SCHEMA`)."""
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("timestamp", pa.int64()),
            ("headers", pa.list_(header)),
        ]
    )


def read_range_batches(
    servers: str, topic: str, partition: int, start: int, stop: int | None, include_headers: bool = True
) -> Iterator[Any]:
    """Read ``topic``/``partition`` from ``start`` to ``stop`` (``None``: true end) as Arrow batches."""
    import pyarrow as pa

    from samzapy.records import TopicPartition

    schema = arrow_schema()
    consumer = reader_consumer(servers)
    try:
        pending: list[Any] = []
        for batch in read_partition(consumer, TopicPartition(topic, partition), start, stop):
            pending.extend(batch)
            if len(pending) >= BATCH_ROWS:
                yield _to_arrow(pa, schema, topic, partition, pending, include_headers)
                pending = []
        if pending:
            yield _to_arrow(pa, schema, topic, partition, pending, include_headers)
    finally:
        consumer.close()


def _to_arrow(pa: Any, schema: Any, topic: str, partition: int, records: list[Any], headers: bool) -> Any:
    n = len(records)
    columns = [
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([r.timestamp for r in records], pa.int64()),
        pa.array(
            [[{"key": k, "value": v} for k, v in (r.headers or [])] if headers else [] for r in records],
            schema.field("headers").type,
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# -- offsets on the driver ------------------------------------------------------------------


def true_end_offset(consumer: Consumer, tp: TopicPartition) -> int:
    """The partition's true end (last offset + 1; 0 when empty), reading past the reported end.

    The reported end is a lower bound on the dev broker (module doc): read from just before
    it until a fetch comes back empty.
    """
    reported = end_offset(consumer, tp)
    begin = consumer.beginning_offsets([tp])[tp]
    last = reported - 1
    for batch in read_partition(consumer, tp, max(reported - 1, begin)):
        last = batch[-1].offset
    return max(last + 1, begin)


def _first_record_at(consumer: Consumer, tp: TopicPartition, offset: int, stop: int) -> Any:
    for batch in read_partition(consumer, tp, offset, stop):
        if batch:
            return batch[0]
    return None


def offset_for_time(consumer: Consumer, tp: TopicPartition, timestamp_ms: int, start: int, stop: int) -> int:
    """The first offset in ``[start, stop)`` whose record's timestamp is ``>= timestamp_ms``.

    ``stop`` when there is none; found by binary search over single-record reads.

    Kafka's ``offsets_for_times`` answers this from the broker's time index; the dev broker's
    returns 0, so it is not used. The search assumes timestamps that do not decrease along
    the partition (log-append time, or producers writing in time order); with out-of-order
    producer timestamps it returns *a* boundary where the timestamp crosses ``timestamp_ms``.
    """
    low, high = start, stop
    while low < high:
        middle = (low + high) // 2
        record = _first_record_at(consumer, tp, middle, high)
        if record is None or record.timestamp >= timestamp_ms:
            high = middle  # offsets in [middle, record.offset) do not exist
        else:
            low = record.offset + 1
    return low

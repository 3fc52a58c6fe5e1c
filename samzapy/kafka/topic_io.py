"""Feed a topic from text lines and read it back: the library under ``samzapy produce|consume``.

:func:`produce_lines` turns lines (stdin or a file) into records: each line is one value,
serialised with a built-in serde (``json`` lines are parsed first, so a line that is not JSON
is refused with its line number), its key taken from a JSON field or given once.
:func:`read_records` reads a topic's partitions, from the beginning or from their true end,
either to the end (robust to the dev broker's undercounted end offsets, see
:mod:`samzapy.kafka.reading`) or following new records. :func:`format_record` renders a
record as one line of text or one JSON object, with its partition and offset.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from samzapy.errors import BadArgumentError, ConfigError, KafkaSystemError, SerdeError
from samzapy.records import Record, TopicPartition
from samzapy.serdes import BUILTIN_SERDES, Serde

if TYPE_CHECKING:
    from samzapy.kafka.consumer import Consumer

# The Kafka client (samzapy.kafka.reading, admin, producer) is imported where it is used, not
# here: the command lines import this module for its formats, and the client costs ~0.1 s.

#: The serdes ``--serde``/``--key-serde`` accept (Samza's built-in ones).
SERDE_NAMES = tuple(BUILTIN_SERDES)


@dataclass(frozen=True)
class Codec:
    """A serde, and how a line of text becomes the object it takes.

    ``reads``: ``text`` (the string serde: the text as it is), ``int`` (integer, long),
    ``bytes`` (the bytes serde, or no serde: the text's UTF-8 bytes), ``json`` (any other serde,
    JSON, Avro or a job's own class: the line is parsed as JSON into the object it takes).
    ``named`` says where it came from in error messages (``--serde json``).
    """

    serde: Serde | None
    reads: str
    named: str

    def parse(self, text: str) -> Any:
        """The object ``text`` stands for.

        >>> builtin_codec("json").parse('{"a": 1}'), builtin_codec("long").parse("42")
        ({'a': 1}, 42)
        """
        if self.reads == "json":
            return orjson.loads(text)
        if self.reads == "int":
            return int(text)
        if self.reads == "bytes":
            return text.encode("utf-8")
        return text

    def encode(self, obj: Any) -> bytes:
        """``obj`` serialised (raw bytes pass through without a serde)."""
        if self.serde is None:
            return obj if isinstance(obj, bytes) else str(obj).encode("utf-8")
        data: bytes = self.serde.to_bytes(obj)
        return data

    def decode(self, data: bytes | None) -> Any:
        """``data`` decoded for display.

        Bytes that do not fit are shown as text (or base64 when not UTF-8) rather than stopping
        the read.
        """
        if data is None:
            return None
        try:
            value = data if self.serde is None else self.serde.from_bytes(data)
        except SerdeError:
            value = data
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return "base64:" + base64.b64encode(value).decode()
        return value


def _reads(serde: Serde | None) -> str:
    from samzapy.serdes import BytesSerde, IntegerSerde, LongSerde, StringSerde

    if serde is None or isinstance(serde, BytesSerde):
        return "bytes"
    if isinstance(serde, StringSerde):
        return "text"
    if isinstance(serde, IntegerSerde | LongSerde):
        return "int"
    return "json"


def builtin_codec(name: str, option: str = "--serde") -> Codec:
    """The codec of the built-in serde ``name`` (``option`` names it in errors)."""
    serde: Serde = BUILTIN_SERDES[name]()
    return Codec(serde, _reads(serde), f"{option} {name}")


@dataclass(frozen=True)
class StreamCodecs:
    """A job's serdes of one stream (:func:`stream_codecs`), and its topic."""

    key: Codec
    value: Codec
    topic: str


def stream_codecs(config_path: str, stream: str) -> StreamCodecs:
    """The key and message serdes a job uses for ``stream`` (``kafka.S`` or ``S``).

    Read from the job's ``.properties`` at ``config_path``: built-in, Avro and the job's own
    serde classes.

    Raises:
        ConfigError: the config is bad, or names no serde that can be built.
    """
    from samzapy.config import load_config, parse_job_config
    from samzapy.serdes import SerdeResolver
    from samzapy.streams import SystemStream

    # check_task_class: import the job's code as a run does (its own serde classes are found
    # next to the properties file); the task class is imported too, without being run
    job = parse_job_config(load_config(config_path), check_task_class=True)
    system_stream = SystemStream.parse(stream) if "." in stream else SystemStream("kafka", stream)
    config = job.stream(system_stream)
    try:
        key, value = SerdeResolver(job).for_stream(system_stream)
    except SerdeError as exc:
        msg = f"the serdes of stream '{system_stream}' in {config_path}: {exc}"
        raise ConfigError(msg) from exc
    where = f"stream {system_stream.stream}'s"
    return StreamCodecs(
        Codec(key, _reads(key), f"{where} key serde '{config.key_serde or 'none'}'"),
        Codec(value, _reads(value), f"{where} msg serde '{config.msg_serde or 'none'}'"),
        system_stream.stream,
    )


@dataclass(frozen=True)
class LineFormat:
    """How a line becomes a record.

    Attributes:
        value: the value's codec; key: the key's.
        key_field: key each record by this field of its (JSON object) value.
        key: key every record by this text (read with the key's codec).
        key_separator: each line is ``KEY<separator>VALUE``.
        null_value: a value equal to this text is sent as a tombstone (a null value; Kafka's
            console producer's ``null.marker``); it needs a key.
        timestamp_field: the record's timestamp from this field of the value: milliseconds
            since the epoch, or an ISO 8601 time (UTC unless it says otherwise).
        headers: added to every record; partition: send every record there.
    """

    value: Codec = field(default_factory=lambda: builtin_codec("json"))
    key_codec: Codec = field(default_factory=lambda: builtin_codec("string", "--key-serde"))
    key_field: str | None = None
    key: str | None = None
    key_separator: str | None = None
    null_value: str | None = None
    timestamp_field: str | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None


@dataclass(frozen=True)
class EncodedLine:
    """A line as the record it becomes (``value`` ``None``: a tombstone)."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None


def _field(value: Any, name: str, what: str) -> Any:
    if not isinstance(value, dict):
        msg = f"--{what} '{name}' needs JSON objects, got {type(value).__name__}"
        raise ValueError(msg)
    if name not in value:
        fields = ", ".join(sorted(value)) or "none"
        msg = f"no field '{name}' for the {what.split('-')[0]} (fields: {fields})"
        raise ValueError(msg)
    return value[name]


def _key_of(value: Any, key_text: str | None, fmt: LineFormat) -> Any:
    if key_text is not None:
        return fmt.key_codec.parse(key_text)
    if fmt.key is not None:
        return fmt.key_codec.parse(fmt.key)
    if fmt.key_field is None:
        return None
    key = _field(value, fmt.key_field, "key-field")
    # A JSON number or bool keys the record by its text under the string key serde.
    return str(key) if fmt.key_codec.reads == "text" and not isinstance(key, str) else key


def timestamp_ms(raw: Any) -> int:
    """A timestamp field as milliseconds since the epoch.

    A number is taken as milliseconds, a string as an ISO 8601 time (UTC when it gives no zone).

    >>> timestamp_ms(1700000000000), timestamp_ms("2024-01-01T00:00:00Z")
    (1700000000000, 1704067200000)
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        msg = f"the timestamp {raw!r} is neither milliseconds nor an ISO 8601 time"
        raise ValueError(msg)
    if isinstance(raw, int | float):
        return int(raw)
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        msg = f"the timestamp '{raw}' is neither milliseconds nor an ISO 8601 time"
        raise ValueError(msg) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def encode_line(line: str, fmt: LineFormat) -> EncodedLine:
    """The record one line becomes.

    Raises:
        ValueError: the line does not parse, has no key field or separator, or is a tombstone
            without a key.
        SerdeError: the parsed value does not fit the serde.

    >>> encode_line('{"user": "ann"}', LineFormat(key_field="user"))
    EncodedLine(key=b'ann', value=b'{"user":"ann"}', timestamp_ms=None)
    >>> encode_line("ann|NULL", LineFormat(key_separator="|", null_value="NULL"))
    EncodedLine(key=b'ann', value=None, timestamp_ms=None)
    """
    key_text = None
    text = line
    if fmt.key_separator is not None:
        key_text, separator, text = line.partition(fmt.key_separator)
        if not separator:
            msg = f"no --key-separator {fmt.key_separator!r} in the line"
            raise ValueError(msg)
    if fmt.null_value is not None and text == fmt.null_value:
        key = _key_of(None, key_text, fmt) if fmt.key_field is None else None
        if key is None:
            msg = f"a tombstone (--null-value {fmt.null_value}) needs a key: give --key or --key-separator"
            raise ValueError(msg)
        return EncodedLine(fmt.key_codec.encode(key), None)
    value = fmt.value.parse(text)
    key = _key_of(value, key_text, fmt)
    stamp = (
        None
        if fmt.timestamp_field is None
        else timestamp_ms(_field(value, fmt.timestamp_field, "timestamp-field"))
    )
    return EncodedLine(None if key is None else fmt.key_codec.encode(key), fmt.value.encode(value), stamp)


def produce_lines(
    servers: str, topic: str, lines: Iterable[str], fmt: LineFormat, *, source: str, partitions: int | None
) -> int:
    """Produce one record per non-empty line to ``topic``; returns how many were sent.

    ``partitions`` creates the topic with that many partitions when it is missing; without it
    a missing topic is refused. Keyed records go where Kafka's default partitioner puts them.

    Raises:
        BadArgumentError: the topic is missing and ``partitions`` is not given, or a line does
            not parse (the message gives its line number and how many records were sent).
    """
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.producer import Producer

    with TopicAdmin(servers) as admin:
        if partitions is not None:
            admin.ensure_topic(topic, partitions)
        elif admin.partition_count(topic) is None:
            msg = f"topic '{topic}' does not exist on {servers}: add --partitions N to create it"
            raise BadArgumentError(msg)
    producer = Producer(servers)
    sent = 0
    try:
        for number, raw in enumerate(lines, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                record = encode_line(line, fmt)
            except (ValueError, SerdeError) as exc:
                producer.flush()
                msg = (
                    f"line {number} of {source} cannot be sent with {fmt.value.named}: {exc} "
                    f"({sent} records before it were sent to '{topic}')"
                )
                raise BadArgumentError(msg) from None
            producer.send(
                topic,
                record.key,
                record.value,
                partition=fmt.partition,
                headers=list(fmt.headers) or None,
                timestamp_ms=record.timestamp_ms,
            )
            sent += 1
        producer.flush()
    finally:
        producer.close()
    return sent


@dataclass(frozen=True)
class ReadSpec:
    """Which records :func:`read_records` yields."""

    from_beginning: bool = False
    follow: bool = False
    max_records: int | None = None
    partitions: tuple[int, ...] | None = None


def _partitions(servers: str, topic: str, wanted: tuple[int, ...] | None) -> list[TopicPartition]:
    from samzapy.kafka.admin import TopicAdmin

    with TopicAdmin(servers) as admin:
        count = admin.partition_count(topic)
    if count is None:
        msg = (
            f"topic '{topic}' does not exist on {servers}; "
            f"create it with: samzapy produce {topic} --partitions N"
        )
        raise KafkaSystemError(msg)
    chosen = list(range(count)) if wanted is None else list(wanted)
    bad = [p for p in chosen if not 0 <= p < count]
    if bad:
        msg = f"topic '{topic}' has partitions 0..{count - 1}; there is no partition {bad[0]}"
        raise BadArgumentError(msg)
    return [TopicPartition(topic, p) for p in chosen]


def read_records(servers: str, topic: str, spec: ReadSpec) -> Iterator[Record]:
    """Yield ``topic``'s records as :class:`ReadSpec` says.

    Partition by partition to each one's true end, or (``follow``) in arrival order until
    ``max_records`` or an interrupt.
    """
    from samzapy.kafka.reading import read_partition, reader_consumer, true_end_offset

    tps = _partitions(servers, topic, spec.partitions)
    consumer = reader_consumer(servers)
    left = spec.max_records
    try:
        starts = {tp: 0 if spec.from_beginning else true_end_offset(consumer, tp) for tp in tps}
        if not spec.follow:
            for tp in tps:
                for batch in read_partition(consumer, tp, starts[tp]):
                    for record in batch:
                        if left is not None and left <= 0:
                            return
                        yield record
                        left = None if left is None else left - 1
            return
        yield from _follow(consumer, starts, left)
    finally:
        consumer.close()


def _follow(consumer: Consumer, starts: dict[TopicPartition, int], left: int | None) -> Iterator[Record]:
    consumer.assign(list(starts))
    for tp, offset in starts.items():
        consumer.seek(tp, offset)
    while left is None or left > 0:
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                if left is not None and left <= 0:
                    return
                yield record
                left = None if left is None else left - 1


def decode(data: bytes | None, serde: str) -> Any:
    r"""``data`` decoded with the built-in serde called ``serde``, for display (:meth:`Codec.decode`).

    >>> decode(b'{"a":1}', "json"), decode(b"not json", "json"), decode(b"\xff", "string")
    ({'a': 1}, 'not json', 'base64:/w==')
    """
    return builtin_codec(serde).decode(data)


@dataclass(frozen=True)
class OutputFormat:
    """How :func:`format_record` renders a record (``text`` or ``json``), with which codecs."""

    format: str = "text"
    value: Codec = field(default_factory=lambda: builtin_codec("json"))
    key: Codec = field(default_factory=lambda: builtin_codec("string", "--key-serde"))
    headers: bool = False


def format_record(record: Record, fmt: OutputFormat) -> str:
    """One line for ``record``: ``text`` is ``partition:offset key value [headers]``.

    ``json`` an object with topic, partition, offset, timestamp, key, value (and headers).
    """
    key = fmt.key.decode(record.key)
    value = fmt.value.decode(record.value)
    headers = {name: _STRING.decode(raw) for name, raw in (record.headers or [])}
    if fmt.format == "json":
        out: dict[str, Any] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": key,
            "value": value,
        }
        if fmt.headers:
            out["headers"] = headers
        return orjson.dumps(out, default=str).decode()
    text = f"{record.partition}:{record.offset}\t{_text(key)}\t{_text(value)}"
    if fmt.headers:
        text += "\t" + " ".join(f"{name}={_text(v)}" for name, v in headers.items())
    return text


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


_STRING = Codec(None, "text", "header")

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
from dataclasses import dataclass
from typing import Any

import orjson
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from samzapy.errors import BadArgumentError, KafkaSystemError, SerdeError
from samzapy.kafka.reading import read_partition, reader_consumer, true_end_offset
from samzapy.serdes import BUILTIN_SERDES, Serde

#: The serdes ``--serde``/``--key-serde`` accept (Samza's built-in ones).
SERDE_NAMES = tuple(BUILTIN_SERDES)


@dataclass(frozen=True)
class LineFormat:
    """How a line becomes a record: the value's serde, where the key comes from, headers."""

    serde: str = "json"
    key_serde: str = "string"
    key_field: str | None = None
    key: str | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None


def parse_value(line: str, serde: str) -> Any:
    """The object a line stands for under ``serde`` (JSON parsed, integers read, text kept).

    >>> parse_value('{"a": 1}', "json"), parse_value("42", "long"), parse_value("hi", "string")
    ({'a': 1}, 42, 'hi')
    """
    if serde == "json":
        return orjson.loads(line)
    if serde in ("integer", "long"):
        return int(line)
    if serde == "bytes":
        return line.encode("utf-8")
    return line


def _key_of(value: Any, fmt: LineFormat) -> Any:
    if fmt.key is not None:
        return parse_value(fmt.key, fmt.key_serde) if fmt.key_serde != "string" else fmt.key
    if fmt.key_field is None:
        return None
    if not isinstance(value, dict):
        msg = f"--key-field '{fmt.key_field}' needs JSON objects, got {type(value).__name__}"
        raise ValueError(msg)
    if fmt.key_field not in value:
        fields = ", ".join(sorted(value)) or "none"
        msg = f"no field '{fmt.key_field}' for the key (fields: {fields})"
        raise ValueError(msg)
    key = value[fmt.key_field]
    # A JSON number or bool keys the record by its text under the string key serde.
    return str(key) if fmt.key_serde == "string" and not isinstance(key, str) else key


def _serde(name: str) -> Serde:
    serde: Serde = BUILTIN_SERDES[name]()
    return serde


def encode_line(line: str, fmt: LineFormat) -> tuple[bytes | None, bytes]:
    """The (key, value) bytes of one line.

    Raises:
        ValueError: the line does not parse under the serde or has no key field.
        SerdeError: the parsed value does not fit the serde.

    >>> encode_line('{"user": "ann"}', LineFormat(key_field="user"))
    (b'ann', b'{"user":"ann"}')
    """
    value = parse_value(line, fmt.serde)
    key = _key_of(value, fmt)
    key_bytes = None if key is None else _serde(fmt.key_serde).to_bytes(key)
    return key_bytes, _serde(fmt.serde).to_bytes(value)


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
                key, value = encode_line(line, fmt)
            except (ValueError, SerdeError) as exc:
                producer.flush()
                msg = (
                    f"line {number} of {source} cannot be sent with --serde {fmt.serde}: {exc} "
                    f"({sent} records before it were sent to '{topic}')"
                )
                raise BadArgumentError(msg) from None
            producer.send(topic, key, value, partition=fmt.partition, headers=list(fmt.headers) or None)
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


def read_records(servers: str, topic: str, spec: ReadSpec) -> Iterator[ConsumerRecord]:
    """Yield ``topic``'s records as :class:`ReadSpec` says: partition by partition to each one's
    true end, or (``follow``) in arrival order until ``max_records`` or an interrupt."""
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


def _follow(consumer: Any, starts: dict[TopicPartition, int], left: int | None) -> Iterator[ConsumerRecord]:
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
    """``data`` decoded with the serde called ``serde``, for display: bytes that do not fit it
    are shown as text (or base64 when not UTF-8) rather than stopping the read.

    >>> decode(b'{"a":1}', "json"), decode(b"not json", "json"), decode(b"\\xff", "string")
    ({'a': 1}, 'not json', 'base64:/w==')
    """
    if data is None:
        return None
    try:
        value = _serde(serde).from_bytes(data)
    except SerdeError:
        value = data
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    return value


@dataclass(frozen=True)
class OutputFormat:
    """How :func:`format_record` renders a record."""

    format: str = "text"
    serde: str = "json"
    key_serde: str = "string"
    headers: bool = False


def format_record(record: ConsumerRecord, fmt: OutputFormat) -> str:
    """One line for ``record``: ``text`` is ``partition:offset key value [headers]``; ``json`` an
    object with topic, partition, offset, timestamp, key, value (and headers)."""
    key = decode(record.key, fmt.key_serde)
    value = decode(record.value, fmt.serde)
    headers = {name: decode(raw, "string") for name, raw in (record.headers or [])}
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
        return orjson.dumps(out).decode()
    text = f"{record.partition}:{record.offset}\t{_text(key)}\t{_text(value)}"
    if fmt.headers:
        text += "\t" + " ".join(f"{name}={_text(v)}" for name, v in headers.items())
    return text


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()

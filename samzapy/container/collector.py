"""Sending a task's outputs: serialise, choose the partition, stamp the output id, produce."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from samzapy.errors import KafkaSystemError, SerdeError
from samzapy.kafka.partitioner import partition_for_key
from samzapy.metrics import Counter
from samzapy.output_ids import ID_HEADER, output_id
from samzapy.records import RecordSink
from samzapy.serdes import Serde, SerdeResolver
from samzapy.streams import SystemStream
from samzapy.task import OutgoingMessageEnvelope

log = logging.getLogger(__name__)

#: An output stream's key serde, message serde and partition count (a ``None`` serde: bytes).
Resolved = tuple[Serde | None, Serde | None, int]


class OutputStreams:
    """Per output stream, its serdes and partition count, resolved once and shared by tasks.

    ``ensure`` is given a function that makes sure a topic exists and returns its partition
    count, so that outputs are created on first use with the configured partition count.
    """

    def __init__(self, serdes: SerdeResolver, ensure_topic: Callable[[SystemStream], int]) -> None:
        self._serdes = serdes
        self._ensure_topic = ensure_topic
        self._resolved: dict[SystemStream, Resolved] = {}

    def resolve(self, stream: SystemStream) -> Resolved:
        """(key serde, msg serde, partition count) of ``stream``."""
        found = self._resolved.get(stream)
        if found is None:
            key_serde, msg_serde = self._serdes.for_stream(stream)
            partitions = self._ensure_topic(stream)
            found = self._resolved[stream] = (key_serde, msg_serde, partitions)
        return found


class TaskCollector:
    """The :class:`samzapy.task.MessageCollector` a task's ``process`` and ``window`` get.

    Every output gets the header ``samzapy.id``: the envelope's own ``id`` if it set one,
    else ``<task>:<input stream>:<input offset>:<n>`` for the n-th output of that input
    (:func:`samzapy.output_ids.output_id`), so that an output re-sent after a crash carries
    the same id as the first copy.

    Every send bumps :attr:`writes` (shared with the task's stores: "did this call write
    anything"). With ``drop_producer_errors`` (``task.drop.producer.errors``, Samza's key) an
    output the producer refuses when it is queued (larger than ``max.request.size``, an
    unknown partition) is logged, counted in :attr:`dropped` and dropped instead of failing
    the call; serialisation errors are the task's and always raise. A delivery failure the
    broker reports later still fails the commit.
    """

    def __init__(
        self,
        task_name: str,
        producer: RecordSink,
        outputs: OutputStreams,
        *,
        writes: Counter | None = None,
        drop_producer_errors: bool = False,
        dropped: Counter | None = None,
    ) -> None:
        self._task_name = task_name
        self._producer = producer
        self._outputs = outputs
        self._stream = "init"
        self._origin: int | str = 0
        self._sequence = 0
        self.sent = 0
        self.writes = writes if writes is not None else Counter()
        self._drop_errors = drop_producer_errors
        self.dropped = dropped if dropped is not None else Counter()
        # The last stream sent to and what it resolved to: a task mostly sends to one stream,
        # and resolving hashes the stream (a frozen dataclass) on every send.
        self._last: tuple[object, Resolved] | None = None

    def begin(self, stream: str, origin: int | str) -> None:
        """Start numbering the outputs caused by the input at offset ``origin`` of ``stream``.

        For ``window()``: ``"window"`` and the call's wall-clock ms.
        """
        self._stream = stream
        self._origin = origin
        self._sequence = 0

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        """Serialise and queue ``envelope`` (see class docstring for its id)."""
        stream = envelope.system_stream
        assert isinstance(stream, SystemStream)
        last = self._last
        if last is not None and last[0] is stream:
            key_serde, msg_serde, partitions = last[1]
        else:
            resolved = self._outputs.resolve(stream)
            self._last = (stream, resolved)
            key_serde, msg_serde, partitions = resolved
        key: bytes | None = envelope.key
        value: bytes | None = envelope.message
        try:  # the common case inline (a call less per output); encode_output names a misfit
            if key is not None:
                key = key_serde.to_bytes(key) if key_serde is not None else _bytes_only(key)
            if value is not None:
                value = msg_serde.to_bytes(value) if msg_serde is not None else _bytes_only(value)
        except (SerdeError, TypeError):
            key = encode_output(key_serde, envelope.key, stream, "key")
            value = encode_output(msg_serde, envelope.message, stream, "message")
        partition = envelope.partition
        if partition is None:
            if envelope.partition_key is not None:
                partition_key = encode_output(key_serde, envelope.partition_key, stream, "key")
                assert partition_key is not None  # encode_output gives None for None alone
                partition = partition_for_key(partition_key, partitions)
            elif key is not None:
                partition = partition_for_key(key, partitions)
            else:
                partition = self.sent % partitions
        envelope_id = envelope.id
        if envelope_id is None:
            envelope_id = output_id(self._task_name, self._stream, self._origin, self._sequence)
            self._sequence += 1
        own = (ID_HEADER, envelope_id.encode())
        extra = envelope.headers
        headers = [*extra, own] if extra else [own]
        try:
            self._producer.send(stream.stream, key, value, partition=partition, headers=headers)
        except KafkaSystemError as error:
            if not self._drop_errors:
                raise
            self.dropped.inc()
            log.warning("dropped an output (task.drop.producer.errors=true): %s", error)
            return
        self.sent += 1
        self.writes.value += 1


def _bytes_only(value: Any) -> bytes:
    """``value`` as bytes for a stream without a serde; a ``TypeError`` for anything else."""
    if type(value) is bytes:
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(type(value).__name__)


def encode_output(serde: Serde | None, value: Any, stream: SystemStream, what: str) -> bytes | None:
    """``value`` (the ``what``: "key" or "message") serialised for ``stream`` with ``serde``.

    Raises:
        SerdeError: the value does not fit; the message names the stream and the config keys
            that choose its serde, in the task's own ``send()``.
    """
    if value is None:
        return None
    kind = "key" if what == "key" else "msg"
    if serde is None:
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        msg = (
            f"cannot send a {type(value).__name__} as the {what} of '{stream}': the stream has no "
            f"serde; set systems.{stream.system}.streams.{stream.stream}.samza.{kind}.serde"
        )
        raise SerdeError(msg)
    try:
        return serde.to_bytes(value)
    except SerdeError as exc:
        msg = (
            f"cannot send {_short(value)} ({type(value).__name__}) as the {what} of '{stream}': {exc}. "
            f"The stream's {what} serde is set by systems.{stream.system}.streams.{stream.stream}.samza."
            f"{kind}.serde (or systems.{stream.system}.samza.{kind}.serde): send a {what} it takes, or "
            f"set a serde that fits there"
        )
        raise SerdeError(msg) from None


def _short(obj: Any, limit: int = 60) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."

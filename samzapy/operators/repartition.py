"""Re-keying a stream into an intermediate topic, so that a following stage is co-partitioned.

The collector partitions by murmur2 of the serialised key (Kafka's default partitioner), so
two streams re-keyed by the same key, into topics with the same partition count, put each key
in the same partition number: the next stage's task sees all of a key's messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from samzapy.errors import TaskError
from samzapy.output_ids import ID_HEADER
from samzapy.records import Headers
from samzapy.streams import SystemStream
from samzapy.task import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    TaskCoordinator,
)


class RepartitionError(TaskError):
    """A message could not be re-keyed."""


class Repartitioner:
    """Sends messages to ``stream`` keyed by ``key_of(message)``.

    ``key_of`` must return a non-``None`` key (a message without a key would be spread over
    partitions round-robin, breaking co-partitioning): a ``None`` key raises
    :class:`RepartitionError`. The message is sent unchanged, with the input's headers except
    its ``samzapy.id`` (the collector stamps the new output's id, derived from the input
    offset, so a re-send after a crash has the same id).
    """

    def __init__(self, stream: SystemStream | str, key_of: Callable[[Any], Any]) -> None:
        self.stream = SystemStream.parse(stream) if isinstance(stream, str) else stream
        self.key_of = key_of

    def send(self, collector: MessageCollector, envelope: IncomingMessageEnvelope) -> None:
        """Re-key ``envelope``'s message and send it."""
        key = self.key_of(envelope.message)
        if key is None:
            msg = (
                f"cannot repartition the message at {envelope.system_stream_partition} offset "
                f"{envelope.offset} into '{self.stream}': the key function "
                f"{getattr(self.key_of, '__qualname__', self.key_of)!r} returned None; "
                "return a key for every message, or filter such messages out before"
            )
            raise RepartitionError(msg)
        # Forwarded as read: a header without a value (None) goes out as one too (the producer
        # sends it through kafka-python's path), which Headers, for what tasks build, leaves out.
        headers = cast(Headers, [h for h in envelope.headers if h[0] != ID_HEADER])
        collector.send(
            OutgoingMessageEnvelope(self.stream, key=key, message=envelope.message, headers=headers)
        )


class RepartitionTask(StreamTask):
    """A ready repartition stage: set ``output_stream`` and implement :meth:`key_of`.

    Example:
        >>> class ByUser(RepartitionTask):
        ...     output_stream = "kafka.pageviews-by-user"
        ...     def key_of(self, message):
        ...         return message["user_id"]
    """

    #: The intermediate stream, ``system.stream``.
    output_stream: str = ""

    def __init__(self) -> None:
        if not self.output_stream:
            msg = f"{type(self).__qualname__} must set output_stream (e.g. 'kafka.pageviews-by-user')"
            raise RepartitionError(msg)
        self._repartitioner = Repartitioner(self.output_stream, self.key_of)

    def key_of(self, message: Any) -> Any:
        """The new key of ``message``."""
        raise NotImplementedError

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Send the message re-keyed to ``output_stream``."""
        self._repartitioner.send(collector, envelope)

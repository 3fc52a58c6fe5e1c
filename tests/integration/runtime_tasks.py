"""Tasks used by the runtime integration tests (imported by job subprocesses)."""

from __future__ import annotations

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream

ORDER = SystemStream("kafka", "delivery-order")


class DeliveryOrderTask(StreamTask):
    """Emits, for every message, which stream it came from and at which offset, in order."""

    def __init__(self) -> None:
        self.seen = 0

    def process(self, envelope, collector, coordinator) -> None:
        self.seen += 1
        record = {"stream": envelope.stream, "offset": envelope.offset, "seq": self.seen}
        collector.send(
            OutgoingMessageEnvelope(
                ORDER, key=str(envelope.partition), message=record, partition=envelope.partition
            )
        )


class IgnoresEverything(StreamTask):
    """Processes every message and does nothing with it (for tests about offsets)."""

    def process(self, envelope, collector, coordinator) -> None:
        pass


class EchoTask(StreamTask):
    """Sends every message, as it is, to ``<input stream>-out`` with the same key."""

    def process(self, envelope, collector, coordinator) -> None:
        out = SystemStream("kafka", f"{envelope.stream}-out")
        collector.send(OutgoingMessageEnvelope(out, key=envelope.key, message=envelope.message))

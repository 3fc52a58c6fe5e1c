"""The task of :mod:`benchmarks.bench_rebalance`: counts per key and sends every new count to
the ``app.output`` topic, so that the output records' timestamps show when each task
processed what."""

from __future__ import annotations

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream


class CountAndEmit(StreamTask, InitableTask):
    """A read-modify-write count per key, each new count sent as an output."""

    def init(self, context):
        self.counts = context.get_store("counts")
        self.out = SystemStream("kafka", context.config["app.output"])

    def process(self, envelope, collector, coordinator):
        key = envelope.key
        count = (self.counts.get(key) or 0) + 1
        self.counts.put(key, count)
        collector.send(OutgoingMessageEnvelope(self.out, key=key, message=str(count)))

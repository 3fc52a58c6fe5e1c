"""Stateful tasks used by the store integration tests (imported by job subprocesses)."""

from __future__ import annotations

from samzapy import InitableTask, StreamTask


class MyStatefulTask(StreamTask, InitableTask):
    """The seed's task, as written in DESIGN/issue 2: the last message per key."""

    def init(self, context):
        self.store = context.get_store("my-store")

    def process(self, envelope, collector, coordinator):
        self.store.put(envelope.key, envelope.message)


class CountingTask(StreamTask, InitableTask):
    """Counts messages per key: a read-modify-write, so a replay that double-counts shows."""

    def init(self, context):
        self.counts = context.get_store("counts")

    def process(self, envelope, collector, coordinator):
        key = envelope.key
        self.counts.put(key, (self.counts.get(key) or 0) + 1)

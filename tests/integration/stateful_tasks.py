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


class CountAndEmitTask(CountingTask):
    """CountingTask that also sends each new count to the topic ``app.output`` names, as
    ``MEMBER:count`` (``MEMBER`` from the environment: which process wrote it)."""

    def init(self, context):
        import os

        from samzapy import SystemStream

        super().init(context)
        self.out = SystemStream("kafka", context.config["app.output"])
        self.member = os.environ.get("MEMBER", "?")

    def process(self, envelope, collector, coordinator):
        from samzapy import OutgoingMessageEnvelope

        key = envelope.key
        count = (self.counts.get(key) or 0) + 1
        self.counts.put(key, count)
        collector.send(OutgoingMessageEnvelope(self.out, key=key, message=f"{self.member}:{count}"))


class TransactionalStateTask(StreamTask, InitableTask):
    """Samza's TransactionalStateIntegrationTest task, ported.

    A message ``v`` puts v -> v and commits; ``-v`` deletes v and commits; a ``:`` prefix
    does the same without committing; ``crash_once`` kills the process the first time it is
    seen (a marker file remembers it). At init the store's contents are written to
    ``$STORE_AT_INIT`` so that the test can see the state a restarted task starts from.
    """

    def init(self, context):
        import json
        import os

        self.store = context.get_store("store")
        self.marker = os.environ["CRASH_MARKER"]
        with self.store.all() as entries:
            state = {entry.key: entry.value for entry in entries}
        with open(os.environ["STORE_AT_INIT"], "w") as out:
            json.dump(state, out)

    def process(self, envelope, collector, coordinator):
        import os
        import signal

        message = envelope.message
        commit = not message.startswith(":")
        message = message.lstrip(":")
        if message == "crash_once":
            if not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return
        if message.startswith("-"):
            self.store.delete(message[1:])
        else:
            self.store.put(message, message)
        if commit:
            coordinator.commit()


class WeightedCountingTask(CountingTask):
    """Adds each key's weight from the side-input store ``weights`` to its count; a key
    without a weight stops the job (the side-input store must hold the whole table)."""

    def init(self, context):
        super().init(context)
        self.weights = context.get_store("weights")

    def process(self, envelope, collector, coordinator):
        key = envelope.key
        weight = self.weights.get(key)
        if weight is None:
            raise LookupError(f"no weight for {key!r} in the side-input store")
        self.counts.put(key, (self.counts.get(key) or 0) + weight)

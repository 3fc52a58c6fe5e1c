"""Tasks for the Spark tests (imported by Spark's Python workers and by job subprocesses)."""

from __future__ import annotations

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream


class IdleTask(StreamTask):
    """Processes nothing of interest: for jobs that only restore their stores."""

    def process(self, envelope, collector, coordinator) -> None:
        """Ignore the message."""


class CountingTask(StreamTask, InitableTask):
    """Counts page views per user in store ``counts`` and emits the new count on every view
    to ``app.output``: a stateful task whose every output depends on the state before it."""

    def init(self, context) -> None:
        """Find the store and the output stream."""
        self.store = context.get_store("counts")
        self.output = SystemStream.parse(context.config.get_str("app.output"))

    def process(self, envelope, collector, coordinator) -> None:
        """Count the view; send ``{"user_id", "count", "view_id"}`` keyed by user."""
        view = envelope.message
        user = view["user_id"]
        count = (self.store.get(user) or 0) + 1
        self.store.put(user, count)
        message = {"user_id": user, "count": count, "view_id": view["view_id"]}
        collector.send(OutgoingMessageEnvelope(self.output, key=user, message=message))


class UserRecordTask(StreamTask, InitableTask):
    """Keeps a record per user in store ``users`` (Avro values: ``user_id``, ``views``, and
    whatever else the schema has) and sends ``{"user_id", "views", "record"}`` on every view."""

    def init(self, context) -> None:
        """Find the store and the output stream."""
        self.store = context.get_store("users")
        self.output = SystemStream.parse(context.config.get_str("app.output"))

    def process(self, envelope, collector, coordinator) -> None:
        """Count the view in the user's record (a copy: stored values are not mutated)."""
        user = envelope.message["user_id"]
        record = dict(self.store.get(user) or {"user_id": user, "views": 0})
        record["views"] += 1
        self.store.put(user, record)
        message = {"user_id": user, "views": record["views"], "record": record}
        collector.send(OutgoingMessageEnvelope(self.output, key=user, message=message))


class DedupTask(StreamTask, InitableTask):
    """Forwards each event (``{"event_id", "ts", ...}``) to ``app.output`` once: a
    :class:`~samzapy.operators.dedup.Deduplicator` in store ``seen`` (bytes) drops re-sent ids
    for ``app.dedup.ttl.ms``."""

    @classmethod
    def state_layouts(cls, config) -> dict:
        """The dedup store's layout (the operator module's helper)."""
        from samzapy.operators.dedup import state_layout

        return {"seen": state_layout(DEDUP_NAMESPACE)}

    def init(self, context) -> None:
        """Rebuild the deduplicator over the restored store."""
        from samzapy.operators.dedup import Deduplicator

        ttl = context.config.get_int("app.dedup.ttl.ms", 3_600_000)
        self.dedup = Deduplicator(context.get_store("seen"), ttl, buckets=4, namespace=DEDUP_NAMESPACE)
        self.output = SystemStream.parse(context.config.get_str("app.output"))

    def process(self, envelope, collector, coordinator) -> None:
        """Send the event unless its id was seen."""
        event = envelope.message
        if not self.dedup.seen_before(event["event_id"], event["ts"]):
            collector.send(OutgoingMessageEnvelope(self.output, key=envelope.key, message=event))


#: The deduplicator's namespace in :class:`DedupTask`'s store.
DEDUP_NAMESPACE = b"dd"

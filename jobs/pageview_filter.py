"""A stateless job: keep page views of real pages, re-key them by user, add the hour.

Input ``pageviews`` (JSON, keyed by page); output ``user-pageviews`` (JSON, keyed by
user_id), partitioned as Kafka's default partitioner would partition the user id.
"""

from __future__ import annotations

from samzapy import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    TaskCoordinator,
)

OUTPUT = SystemStream("kafka", "user-pageviews")
HOUR_MS = 3_600_000


class PageViewFilterTask(StreamTask):
    """Drops views of ``/page/0`` (our stand-in for health checks); re-keys the rest by user."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Drop a health-check view; send any other with its hour, keyed by user."""
        view = envelope.message
        if view["page"] == "/page/0":
            return
        enriched = {**view, "hour": view["ts"] // HOUR_MS * HOUR_MS}
        collector.send(OutgoingMessageEnvelope(OUTPUT, key=view["user_id"], message=enriched))

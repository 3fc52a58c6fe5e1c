"""Page views enriched with the user's zip code (a stream-table join).

Inputs ``profiles`` (JSON keyed by user_id; a *bootstrap* stream, read to its head before
any page view, so that views are enriched with the profiles as of start-up and then with
every later update) and ``pageviews-by-user`` (page views keyed by user_id, e.g. written by
:mod:`samzapy.jobs.pageview_repartition`). Output ``pageviews-enriched``: the view plus
``zip``, keyed by user_id. ``join.kind=inner`` drops views of users without a profile
(counted in ``unmatched-views``); ``left`` sends them with ``"zip": null``. Control records
in the input are ignored. Config: ``config/pageview-enrich.properties``; semantics in
``docs/patterns/stream-table-join.md``.

The output id derives from the input's id (``enrich:`` + its ``samzapy.id``, else the task,
stream and offset): a view re-sent upstream is enriched under the same id, so a consumer
that drops duplicates by id drops it here too.
"""

from __future__ import annotations

from typing import Any

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.operators import StreamTableJoin, id_from_headers
from samzapy.operators.event_time import control_of


class PageViewEnrichTask(StreamTask, InitableTask):
    """Adds ``zip`` from the latest profile of the view's user; see the module docstring."""

    def init(self, context: Any) -> None:
        """Read the config; open the table store."""
        config = context.config
        self.table_stream = config.get_str("join.table.stream", "profiles")
        self.join = StreamTableJoin(
            context.get_store("zip-codes"),
            lambda view, zip_code: {**view, "zip": zip_code},
            config.get_str("join.kind", "inner"),
        )
        self.output = SystemStream.parse(config.get_str("join.output.stream", "kafka.pageviews-enriched"))
        self.task_name = context.task_name
        self.unmatched = context.metrics.counter("unmatched-views")

    def process(self, envelope, collector, coordinator) -> None:
        """Update the table, or enrich a view."""
        if envelope.stream == self.table_stream:
            profile = envelope.message
            self.join.update_table(envelope.key, None if profile is None else profile["zip"])
            return
        if control_of(envelope) is not None:
            return
        enriched = self.join.join(envelope.key, envelope.message)
        if enriched is None:
            self.unmatched.inc()
            return
        upstream = id_from_headers(envelope.headers)
        origin = upstream or f"{self.task_name}:{envelope.stream}:{envelope.offset}"
        collector.send(
            OutgoingMessageEnvelope(self.output, key=envelope.key, message=enriched, id=f"enrich:{origin}")
        )

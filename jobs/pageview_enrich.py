"""Page views enriched with the user's zip code (a stream-table join).

Inputs ``profiles`` (JSON keyed by user_id; a *bootstrap* stream, read to its head before
any page view, so that views are enriched with the profiles as of start-up and then with
every later update) and ``pageviews-by-user`` (page views keyed by user_id, e.g. written by
:mod:`samzapy.jobs.pageview_repartition`). Output ``pageviews-enriched``: the view plus
``zip``, keyed by user_id. ``join.kind=inner`` drops views of users without a profile
(counted in ``unmatched-views``); ``left`` sends them with ``"zip": null``. Control records
in either input are ignored (with ``join.time=processing``). Config:
``config/pageview-enrich.properties``; semantics in ``docs/patterns/stream-table-join.md``.

``join.time=event`` (issue 19) joins each view with the profile valid at the view's event time
(``ts``) instead of the latest one: profiles are kept as versions by ``updated_at`` (a delete
at the record's timestamp) in a versioned table (:mod:`samzapy.stores.versioned`, store
``join.versioned.store``, default ``zip-versions``, bytes, with a changelog and
``stores.<store>.versioned.history.ms``), and a view waits until the profiles' progress
minus ``join.grace.ms`` (default 0: the grace for out-of-order profile updates) has passed its
time, or the profiles stream has ended (an ``end-of-stream`` control record). The pairs then
do not depend on how the two inputs interleave: a rerun or a Spark replay gives the same.
Config: ``config/pageview-enrich-event-time.properties``.

The output id derives from the input's id (``enrich:`` + its ``samzapy.id``, else the task,
stream and offset): a view re-sent upstream is enriched under the same id, so a consumer
that drops duplicates by id drops it here too.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from samzapy import (
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    TaskContext,
    TaskCoordinator,
)
from samzapy.config import Config
from samzapy.operators import StreamTableJoin, id_from_headers
from samzapy.operators.event_time import END_OF_STREAM, control_of
from samzapy.operators.temporal_join import EventTimeStreamTableJoin
from samzapy.operators.temporal_join import state_layouts as temporal_layouts

#: ``join.time=event``: the namespaces of the versioned table and of the waiting views in
#: their one store.
TABLE_NAMESPACE, BUFFER_NAMESPACE = b"zv", b"jb"


class PageViewEnrichTask(StreamTask, InitableTask):
    """Adds ``zip`` from the latest profile of the view's user; see the module docstring."""

    @classmethod
    def state_layouts(cls, config: Config) -> dict[str, Any]:
        """How the stores read as data (:mod:`samzapy.operators.state_layout`).

        With ``join.time=event``, the versions and the waiting views; else the key-value table.
        """
        if config.get_str("join.time", "processing") != "event":
            return {}
        name = config.get_str("join.versioned.store", "zip-versions")
        return temporal_layouts(
            name, name, table_namespace=TABLE_NAMESPACE, buffer_namespace=BUFFER_NAMESPACE
        )

    def init(self, context: TaskContext) -> None:
        """Read the config; open the table store."""
        config = context.config
        self.table_stream = config.get_str("join.table.stream", "profiles")
        mode = config.get_str("join.time", "processing")
        if mode not in ("processing", "event"):
            msg = f"join.time must be 'processing' or 'event', got {mode!r}"
            raise ValueError(msg)
        self.temporal: EventTimeStreamTableJoin | None = None
        if mode == "event":
            name = config.get_str("join.versioned.store", "zip-versions")
            store = context.get_store(name)
            table = context.get_versioned_store(name, namespace=TABLE_NAMESPACE)
            self.temporal = EventTimeStreamTableJoin(
                table,
                store,
                _enrich,
                kind=config.get_str("join.kind", "inner"),
                grace_ms=config.get_int("join.grace.ms", 0),
                namespace=BUFFER_NAMESPACE,
            )
        else:
            self.join = StreamTableJoin(
                context.get_store("zip-codes"),
                _enrich,
                # checked by StreamTableJoin (inner or left)
                cast("Literal['inner', 'left']", config.get_str("join.kind", "inner")),
            )
        self.output = SystemStream.parse(config.get_str("join.output.stream", "kafka.pageviews-enriched"))
        self.task_name = context.task_name
        self.unmatched = context.metrics.counter("unmatched-views")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Update the table, or enrich a view."""
        if self.temporal is not None:
            self._process_event_time(self.temporal, envelope, collector)
            return
        if control_of(envelope) is not None:
            return  # end-of-stream on either input (the table's too) changes nothing here
        if envelope.stream == self.table_stream:
            profile = envelope.message
            self.join.update_table(envelope.key, None if profile is None else profile["zip"])
            return
        enriched = self.join.join(envelope.key, envelope.message)
        if enriched is None:
            self.unmatched.inc()
            return
        collector.send(
            OutgoingMessageEnvelope(
                self.output, key=envelope.key, message=enriched, id=f"enrich:{self._origin(envelope)}"
            )
        )

    def _origin(self, envelope: IncomingMessageEnvelope) -> str:
        upstream = id_from_headers(envelope.headers)
        return upstream or f"{self.task_name}:{envelope.stream}:{envelope.offset}"

    def _process_event_time(
        self,
        temporal: EventTimeStreamTableJoin,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
    ) -> None:
        """``join.time=event``: version the profile, or buffer the view; send what is released."""
        control = control_of(envelope)
        if envelope.stream == self.table_stream:
            if control is not None:
                released = temporal.end_table() if control.kind == END_OF_STREAM else []
            else:
                profile = envelope.message
                time_ms = envelope.timestamp if profile is None else profile["updated_at"]
                zip_code = None if profile is None else profile["zip"]
                released = temporal.update_table(envelope.key.encode(), zip_code, time_ms)
        elif control is not None:
            return
        else:
            ref = self._origin(envelope).encode()
            released = temporal.join(envelope.key.encode(), envelope.message, envelope.message["ts"], ref)
        for result in released:
            if result.value is None:
                self.unmatched.inc()
                continue
            rid = f"enrich:{result.ref.decode()}"
            collector.send(
                OutgoingMessageEnvelope(self.output, key=result.key.decode(), message=result.value, id=rid)
            )


def _enrich(view: dict[str, Any], zip_code: Any) -> dict[str, Any]:
    """The view with its user's zip code."""
    return {**view, "zip": zip_code}

"""Page views enriched with the user's zip code from a *global table* (side input).

The same join as :mod:`samzapy.jobs.pageview_enrich`, but the table is not a task input: the
store ``user-zips`` is filled from the ``profiles`` topic as a side input
(``stores.user-zips.side.inputs=kafka.profiles``, scope ``global``). Every task of the
container reads one shared store holding *every* partition of ``profiles``, so the views
need not be partitioned like the profiles; the container reads ``profiles`` to its end
before the first view is processed and applies later profile updates while it runs
(docs/side-inputs.md).

:class:`ZipFromProfile` is the side-input processor: it keeps only the zip code of each
profile (a tombstone deletes the user). :class:`GlobalTableEnrichTask` reads the store
(read-only) and sends the view plus ``zip`` to ``join.output.stream``, keyed by user_id;
views of users without a zip are counted in ``unmatched-views`` (``join.kind=inner``) or
sent with ``"zip": null`` (``left``). Control records in the input are ignored. Config:
``config/pageview-enrich-global.properties``.

The output id is ``enrich:`` + the input's ``samzapy.id`` (else its task, stream and
offset), so a view sent again is enriched under the same id.
"""

from __future__ import annotations

from typing import Any

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
from samzapy.operators import id_from_headers
from samzapy.operators.event_time import control_of


class ZipFromProfile:
    """Side-input processor: a profile record becomes ``user_id -> zip``.

    >>> from types import SimpleNamespace as Envelope
    >>> ZipFromProfile().process(Envelope(key="u1", message={"zip": "94301"}), store=None)
    [('u1', '94301')]
    >>> ZipFromProfile().process(Envelope(key="u1", message=None), store=None)
    [('u1', None)]
    """

    def process(self, envelope: Any, store: Any) -> list[tuple[Any, Any]]:
        """One write: the profile's zip, or a delete for a tombstone."""
        profile = envelope.message
        return [(envelope.key, None if profile is None else profile["zip"])]


class GlobalTableEnrichTask(StreamTask, InitableTask):
    """Adds ``zip`` from the global ``user-zips`` store; see the module docstring."""

    def init(self, context: TaskContext) -> None:
        """Read the config; open the side-input store."""
        config = context.config
        self.zips = context.get_store(config.get_str("join.table.store", "user-zips"))
        self.inner = config.get_str("join.kind", "inner") == "inner"
        self.output = SystemStream.parse(
            config.get_str("join.output.stream", "kafka.pageviews-enriched-global")
        )
        self.task_name = context.task_name
        self.unmatched = context.metrics.counter("unmatched-views")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Enrich one view with its user's current zip code."""
        if control_of(envelope) is not None:
            return
        zip_code = self.zips.get(envelope.key)
        if zip_code is None and self.inner:
            self.unmatched.inc()
            return
        upstream = id_from_headers(envelope.headers)
        origin = upstream or f"{self.task_name}:{envelope.stream}:{envelope.offset}"
        collector.send(
            OutgoingMessageEnvelope(
                self.output,
                key=envelope.key,
                message={**envelope.message, "zip": zip_code},
                id=f"enrich:{origin}",
            )
        )

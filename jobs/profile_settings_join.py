"""User profiles joined with user settings by user_id (a table-table join).

Inputs ``profiles`` and ``settings`` (JSON keyed by user_id, a null value deletes), read as
tables: the latest value of each per user is kept in a store (``profiles``, ``settings``).
On every change the task writes the user's current joined record,
``{"user_id", "profile", "settings"}`` (``join.kind``: inner, left or outer), to

* the ``joined`` store, whose changelog (``user-profile-settings-table``, compacted) *is*
  the joined table: restorable, and readable by other jobs as a bootstrap table;
* the ``user-profile-settings`` stream of changes, keyed by user_id: the joined record, or a
  tombstone when the user has no joined record after the change.

With ``join.time=event`` (issue 19) each held version carries its event time (``updated_at``;
a delete's is the record's timestamp) and an update older than the version held for its
user and side is ignored (counted in ``stale-updates``, nothing sent): the joined table ends
as the join of each side's newest version whatever order the updates came in.

Config: ``config/profile-settings-join.properties``; semantics in
``docs/patterns/table-table-join.md``.

Each change's ``samzapy.id`` names the input that caused it and the versions joined
(``tt:<stream>:<partition>:<offset>:<profile offset>:<settings offset>``): the same id always carries the
same bytes, even though which versions meet depends on how the two inputs interleave. Every
change states the key's whole current value (a tombstone too, even if the key had none), so
the last change per key is the table, whatever happened in runs that crashed.
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
from samzapy.operators import TableTableJoin


def _version(entry: dict[str, Any] | None) -> str:
    return "-" if entry is None else str(entry["offset"])


class ProfileSettingsJoinTask(StreamTask, InitableTask):
    """Keeps both tables and their join; see the module docstring."""

    def init(self, context: TaskContext) -> None:
        """Read the config; open the three stores."""
        config = context.config
        self.left_stream = config.get_str("join.left.stream", "profiles")
        self.right_stream = config.get_str("join.right.stream", "settings")
        self.left = context.get_store("profiles")
        self.right = context.get_store("settings")
        self.joined = context.get_store("joined")
        mode = config.get_str("join.time", "processing")
        if mode not in ("processing", "event"):
            msg = f"join.time must be 'processing' or 'event', got {mode!r}"
            raise ValueError(msg)
        self.event_time = mode == "event"
        self.join = TableTableJoin(
            self.left,
            self.right,
            lambda left, right: (left, right),
            # checked by TableTableJoin (inner, left or outer)
            cast("Literal['inner', 'left', 'outer']", config.get_str("join.kind", "inner")),
            time_of=(lambda entry: entry["ts"]) if self.event_time else None,
        )
        self.stale = context.metrics.counter("stale-updates")
        self.output = SystemStream.parse(config.get_str("join.output.stream", "kafka.user-profile-settings"))

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Apply one table update and send the user's joined record (or a tombstone)."""
        user = envelope.key
        entry = None if envelope.message is None else {"offset": envelope.offset, "value": envelope.message}
        time_ms = None
        if self.event_time:
            time_ms = envelope.timestamp if entry is None else envelope.message["updated_at"]
            if entry is not None:
                entry["ts"] = time_ms
        side: Literal["left", "right"]
        if envelope.stream == self.left_stream:
            side = "left"
        elif envelope.stream == self.right_stream:
            side = "right"
        else:
            expected = f"{self.left_stream} or {self.right_stream}"
            msg = f"unexpected input stream '{envelope.stream}': expected {expected}"
            raise ValueError(msg)
        if self.join.stale(side, user, time_ms):
            self.stale.inc()
            return
        update = self.join.update_left if side == "left" else self.join.update_right
        change = update(user, entry, time_ms)
        record = None
        if change is not None and change.value is not None:
            left, right = change.value
            record = {
                "user_id": user,
                "profile": None if left is None else left["value"],
                "settings": None if right is None else right["value"],
            }
        self.joined.put(user, record)
        versions = f"{_version(self.left.get(user))}:{_version(self.right.get(user))}"
        collector.send(
            OutgoingMessageEnvelope(
                self.output,
                key=user,
                message=record,
                id=f"tt:{envelope.stream}:{envelope.partition}:{envelope.offset}:{versions}",
            )
        )

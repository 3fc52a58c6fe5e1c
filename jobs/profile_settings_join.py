"""User profiles joined with user settings by user_id (a table-table join).

Inputs ``profiles`` and ``settings`` (JSON keyed by user_id, a null value deletes), read as
tables: the latest value of each per user is kept in a store (``profiles``, ``settings``).
On every change the task writes the user's current joined record,
``{"user_id", "profile", "settings"}`` (``join.kind``: inner, left or outer), to

* the ``joined`` store, whose changelog (``user-profile-settings-table``, compacted) *is*
  the joined table: restorable, and readable by other jobs as a bootstrap table;
* the ``user-profile-settings`` stream of changes, keyed by user_id: the joined record, or a
  tombstone when the user has no joined record after the change.

Config: ``config/profile-settings-join.properties``; semantics in
``docs/patterns/table-table-join.md``.

Each change's ``samzapy.id`` names the input that caused it and the versions joined
(``tt:<stream>:<partition>:<offset>:<profile offset>:<settings offset>``): the same id always carries the
same bytes, even though which versions meet depends on how the two inputs interleave. Every
change states the key's whole current value (a tombstone too, even if the key had none), so
the last change per key is the table, whatever happened in runs that crashed.
"""

from __future__ import annotations

from typing import Any

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.operators import TableTableJoin


def _version(entry: dict | None) -> str:
    return "-" if entry is None else str(entry["offset"])


class ProfileSettingsJoinTask(StreamTask, InitableTask):
    """Keeps both tables and their join; see the module docstring."""

    def init(self, context: Any) -> None:
        """Read the config; open the three stores."""
        config = context.config
        self.left_stream = config.get_str("join.left.stream", "profiles")
        self.right_stream = config.get_str("join.right.stream", "settings")
        self.left = context.get_store("profiles")
        self.right = context.get_store("settings")
        self.joined = context.get_store("joined")
        self.join = TableTableJoin(
            self.left, self.right, lambda left, right: (left, right), config.get_str("join.kind", "inner")
        )
        self.output = SystemStream.parse(config.get_str("join.output.stream", "kafka.user-profile-settings"))

    def process(self, envelope, collector, coordinator) -> None:
        """Apply one table update and send the user's joined record (or a tombstone)."""
        user = envelope.key
        entry = None if envelope.message is None else {"offset": envelope.offset, "value": envelope.message}
        if envelope.stream == self.left_stream:
            change = self.join.update_left(user, entry)
        elif envelope.stream == self.right_stream:
            change = self.join.update_right(user, entry)
        else:
            expected = f"{self.left_stream} or {self.right_stream}"
            msg = f"unexpected input stream '{envelope.stream}': expected {expected}"
            raise ValueError(msg)
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

"""A task's event-time watermark, MillWheel-style: it never goes back, even across restarts."""

from __future__ import annotations

from samzapy.operators.key_encoding import MIN_MS, decode_ms, encode_ms
from samzapy.operators.state_layout import MIN, TaskEntries
from samzapy.stores.base import KeyValueStore

_KEY = b"\x00wm"


def watermark_entries(namespace: bytes = b"") -> tuple[TaskEntries, ...]:
    """A :class:`Watermark`'s entry in a layout's task-own entries.

    A reshard keeps the smallest of the old tasks' watermarks (``min``).
    """
    return (TaskEntries(namespace + _KEY, MIN),)


class Watermark:
    r"""The low watermark of one task: max event time seen minus the allowed lateness.

    Promises:
        * ``current`` never decreases, across restarts too: every advance is written to the
          store (one ``put``, absorbed by the store's object cache until the next commit), and
          a new ``Watermark`` over the restored store starts from the persisted value. Because
          the store is restored to exactly the checkpointed state, the watermark after a crash
          equals the one after the checkpointed input, and replaying that input moves it the
          same way again.
        * Before any event, ``current`` is :data:`~samzapy.operators.key_encoding.MIN_MS`.

    The store is a ``KeyValueStore[bytes, bytes]``; the watermark uses one key
    (``namespace + b"\x00wm"``), so it may share a store with other operators given
    distinct namespaces.
    """

    __slots__ = ("_store", "_key", "allowed_lateness_ms", "current")

    def __init__(
        self, store: KeyValueStore[bytes, bytes], allowed_lateness_ms: int = 0, *, namespace: bytes = b""
    ) -> None:
        if allowed_lateness_ms < 0:
            msg = f"allowed_lateness_ms must be >= 0, got {allowed_lateness_ms}"
            raise ValueError(msg)
        self._store = store
        self._key = namespace + _KEY
        self.allowed_lateness_ms = allowed_lateness_ms
        stored = store.get(self._key)
        #: The watermark in ms: no event with an earlier time is expected any more.
        self.current: int = MIN_MS if stored is None else decode_ms(stored)

    def observe(self, event_time_ms: int) -> bool:
        """Account for an event at ``event_time_ms``; True when the watermark advanced."""
        return self.advance_to(event_time_ms - self.allowed_lateness_ms)

    def advance_to(self, time_ms: int) -> bool:
        """Move the watermark to ``time_ms`` if that is later (e.g. for an idle input); True when it advanced.

        Never moves it back.
        """
        if time_ms <= self.current:
            return False
        self.current = time_ms
        self._store.put(self._key, encode_ms(time_ms))
        return True

    def is_behind(self, event_time_ms: int) -> bool:
        """True when ``event_time_ms`` is earlier than the watermark (the event is late)."""
        return event_time_ms < self.current

    def has_passed(self, end_ms: int) -> bool:
        """True when the watermark has reached ``end_ms`` (an exclusive end).

        A window or join interval ending there is complete.
        """
        return end_ms <= self.current

    def __repr__(self) -> str:
        return f"Watermark(current={self.current}, allowed_lateness_ms={self.allowed_lateness_ms})"

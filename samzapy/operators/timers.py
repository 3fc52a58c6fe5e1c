"""Timers for tasks, kept in a store so that they survive crashes and restarts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from samzapy.operators.key_encoding import (
    MIN_MS,
    decode_time_key,
    encode_ms,
    encode_time_key,
    until_inclusive,
)
from samzapy.operators.watermark import Watermark
from samzapy.stores.base import KeyValueStore

Domain = Literal["event", "processing"]
_TAGS: dict[str, bytes] = {"event": b"\x00te", "processing": b"\x00tp"}


@dataclass(frozen=True, slots=True)
class Timer:
    """A fired timer: its domain, time, key and the payload it was set with."""

    domain: Domain
    time_ms: int
    key: bytes
    payload: bytes = b""


class TimerService:
    """Event-time and processing-time timers in a bytes store.

    Event-time timers (due when the watermark reaches their time) and processing-time timers
    (due when the wall clock does), in a ``KeyValueStore[bytes, bytes]``.

    Promises:
        * A timer is identified by (domain, time, key): setting it again replaces its payload.
        * :meth:`fire_due` returns each due timer once and deletes it in the same call, in
          (time, key) order, event timers first. Since the store is restored to its
          checkpointed state after a crash, a timer fired after the last checkpoint fires
          again after the restart (at least once, never lost).
        * Event timers depend only on the watermark, so their firing is deterministic for a
          given input order; processing timers depend on the wall clock and are not.
        * Timers set while handling fired timers fire at the next :meth:`fire_due` call.

    Implementation: store keys are ``namespace + tag + time + key`` (time-first, see
    :mod:`samzapy.operators.key_encoding`), so the due timers are one range scan; nothing is kept in
    memory, so the service works unchanged after a restore.
    """

    def __init__(
        self, store: KeyValueStore[bytes, bytes], watermark: Watermark, *, namespace: bytes = b""
    ) -> None:
        self._store = store
        self._watermark = watermark
        self._prefixes = {domain: namespace + tag for domain, tag in _TAGS.items()}

    def set_event_timer(self, time_ms: int, key: bytes, payload: bytes = b"") -> None:
        """Fire when the watermark reaches ``time_ms``."""
        self._store.put(self._prefixes["event"] + encode_time_key(time_ms, key), payload)

    def set_processing_timer(self, time_ms: int, key: bytes, payload: bytes = b"") -> None:
        """Fire when the wall clock (as passed to :meth:`fire_due`) reaches ``time_ms``."""
        self._store.put(self._prefixes["processing"] + encode_time_key(time_ms, key), payload)

    def delete(self, time_ms: int, key: bytes, domain: Domain = "event") -> None:
        """Cancel a timer (no error when there is none)."""
        self._store.delete(self._prefixes[domain] + encode_time_key(time_ms, key))

    def fire_due(self, now_wall_ms: int) -> Iterator[Timer]:
        """The due timers, already deleted from the store (see the class docstring)."""
        fired = self._take("event", self._watermark.current)
        fired += self._take("processing", now_wall_ms)
        return iter(fired)

    def _take(self, domain: Domain, up_to_ms: int) -> list[Timer]:
        prefix = self._prefixes[domain]
        with self._store.range(prefix + encode_ms(MIN_MS), until_inclusive(prefix, up_to_ms)) as entries:
            found = [(entry.key, entry.value) for entry in entries]
        if not found:
            return []
        self._store.delete_all(key for key, _ in found)
        n = len(prefix)
        return [Timer(domain, *decode_time_key(key, n), value) for key, value in found]

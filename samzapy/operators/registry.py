"""Photon's IdRegistry for one task: each event id is joined at most once, within a retention.

Store layout (one ``KeyValueStore[bytes, bytes]``, under ``namespace``):

* ``ns + 0x00 'ri' + id`` -> ``event time + token``: the registered ids;
* ``ns + 0x00 'rg' + event time + id`` -> ``b""``: a time-first index for garbage collection;
* ``ns + 0x00 'rm'`` -> the largest event time registered so far (the GC boundary is derived
  from it and, persisted, never goes back — as Photon keeps its GC boundary in the registry).
"""

from __future__ import annotations

from samzapy.metrics import MetricsGroup
from samzapy.operators.key_encoding import MIN_MS, decode_ms, encode_ms, until_inclusive
from samzapy.operators.state_layout import COPY, MAX, TaskEntries
from samzapy.stores.base import KeyValueStore

IDS_TAG, GC_TAG, MAX_TAG = b"\x00ri", b"\x00rg", b"\x00rm"


def registry_entries(namespace: bytes = b"") -> tuple[TaskEntries, ...]:
    """:class:`JoinRegistry`'s entries in a layout's task-own entries.

    Registered ids and their GC index (a reshard copies them to every new task that may receive
    the old task's keys, ``copy``), the largest time registered (``max``).
    """
    return (
        TaskEntries(namespace + IDS_TAG, COPY),
        TaskEntries(namespace + GC_TAG, COPY),
        TaskEntries(namespace + MAX_TAG, MAX),
    )


class JoinRegistry:
    """Registers event ids (e.g. click ids) so that each is joined at most once.

    Promises:
        * :meth:`try_register` returns True exactly once per id among calls whose event time
          is within ``retention_ms`` of the largest event time registered so far (the
          *horizon*); for an id registered with a non-empty ``token``, a retry with the same
          token returns True again (Photon's idempotent retry).
        * Events older than the horizon are refused (False, counted in
          ``registry-too-old``): whether they were joined can no longer be known, and joining
          twice is worse than not joining (Photon drops them too).
        * Results do not depend on when :meth:`gc` runs: entries older than the horizon are
          treated as absent whether or not they were collected yet.
        * State lives only in the store, so that after a crash the registry equals its
          checkpointed state; with transactional state, a click whose join output was lost
          in a crash is registered again when its input is reprocessed, and its join output
          re-sent with the same id (exactly once eventually, after dedup by id).

    Call :meth:`gc` periodically (e.g. from ``window()``); it deletes entries older than the
    horizon via the time-first index.
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        retention_ms: int,
        *,
        namespace: bytes = b"",
        metrics: MetricsGroup | None = None,
    ) -> None:
        if retention_ms <= 0:
            msg = f"retention_ms must be > 0, got {retention_ms}"
            raise ValueError(msg)
        self._store = store
        self.retention_ms = retention_ms
        self._ids = namespace + IDS_TAG
        self._gc = namespace + GC_TAG
        self._max_key = namespace + MAX_TAG
        stored = store.get(self._max_key)
        self._max_time = MIN_MS if stored is None else decode_ms(stored)
        self._too_old = metrics.counter("registry-too-old") if metrics is not None else None

    @property
    def horizon(self) -> int:
        """Event times before this are outside the retention."""
        return self._max_time - self.retention_ms

    def try_register(self, event_id: str, event_time_ms: int, token: bytes = b"") -> bool:
        """Register ``event_id``; True when the caller may emit its join (see the class)."""
        if event_time_ms > self._max_time:
            self._max_time = event_time_ms
            self._store.put(self._max_key, encode_ms(event_time_ms))
        horizon = self.horizon
        if event_time_ms < horizon:
            if self._too_old is not None:
                self._too_old.inc()
            return False
        id_bytes = event_id.encode()
        found = self._store.get(self._ids + id_bytes)
        if found is not None and decode_ms(found) >= horizon:
            return bool(token) and found[8:] == token
        if found is not None:  # expired but not collected yet: replace it and its index entry
            self._store.delete(self._gc + found[:8] + id_bytes)
        self._store.put(self._ids + id_bytes, encode_ms(event_time_ms) + token)
        self._store.put(self._gc + encode_ms(event_time_ms) + id_bytes, b"")
        return True

    def advance_to(self, event_time_ms: int) -> None:
        """Raise the largest registered time to ``event_time_ms`` (never lowers it).

        For a registry only read and collected any more (a join that decides elsewhere now,
        :mod:`samzapy.operators.stream_join_migrate`): its horizon keeps up with the new
        decisions, so :meth:`gc` collects it.
        """
        if event_time_ms > self._max_time:
            self._max_time = event_time_ms
            self._store.put(self._max_key, encode_ms(event_time_ms))

    def is_registered(self, event_id: str) -> bool:
        """True when ``event_id`` is registered within the retention.

        Photon's dispatcher looks ids up before joining, to skip work.
        """
        found = self._store.get(self._ids + event_id.encode())
        return found is not None and decode_ms(found) >= self.horizon

    def gc(self) -> int:
        """Delete the entries older than the horizon; how many were deleted."""
        prefix = self._gc
        with self._store.range(
            prefix + encode_ms(MIN_MS), until_inclusive(prefix, self.horizon - 1)
        ) as entries:
            due = [e.key for e in entries]
        if not due:
            return 0
        n = len(prefix) + 8
        self._store.delete_all([*due, *(self._ids + k[n:] for k in due)])
        return len(due)

"""The event-time stream-table join (Kafka Streams KIP-914).

Each stream record is joined with the table value that was valid at the record's event time,
from a :class:`~samzapy.stores.versioned.VersionedStore`.

A stream record at ``t`` waits in a buffer until the table's event-time progress (the largest
update time seen) minus ``grace_ms`` has reached ``t`` (or the table stream has ended): by
then every table update with a time up to ``t`` has arrived, provided the table stream is
out of order by at most ``grace_ms``. It is then joined with the version valid at ``t``.
So the pairs do not depend on how the two inputs interleave: the live run, a rerun and a
Spark replay give the same pairs, whatever the order in which the container read them.

Buffer layout (``namespace`` + tag)::

    0x00 'jb' + t + ref  ->  JSON [key (hex), stream value]   (waiting stream records)
    0x00 'je'            ->  b"1" once the table stream has ended

``ref`` is the caller's unique, deterministic reference of the stream record (e.g. its id);
the join hands it back with the result, so the output id does not depend on when the record
was released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson

from samzapy.operators.key_encoding import MAX_MS, MIN_MS, decode_ms, encode_ms, prefix_end, until_inclusive
from samzapy.operators.state_layout import SharedLayout
from samzapy.operators.temporal_layout import BUFFER_TAG, ENDED_TAG, TemporalBufferLayout
from samzapy.operators.versioned_layout import VersionedLayout
from samzapy.stores.base import KeyValueStore
from samzapy.stores.versioned import VersionedStore

#: Buffered records released per store scan.
RELEASE_BATCH = 10_000


def state_layouts(
    table_store: str, buffer_store: str, *, table_namespace: bytes = b"", buffer_namespace: bytes = b""
) -> dict[str, Any]:
    """How the join's stores read as data and move in a reshard, for a task's ``state_layouts``.

    The versioned table (:class:`~samzapy.operators.versioned_layout.VersionedLayout`) and the
    buffer of waiting records
    (:class:`~samzapy.operators.temporal_layout.TemporalBufferLayout`); one
    :class:`~samzapy.operators.state_layout.SharedLayout` when both live in one store.
    """
    table, buffer = VersionedLayout(table_namespace), TemporalBufferLayout(buffer_namespace)
    if table_store == buffer_store:
        return {table_store: SharedLayout((table, buffer))}
    return {table_store: table, buffer_store: buffer}


@dataclass(frozen=True, slots=True)
class TemporalResult:
    """A released stream record.

    Its ``key``, ``ref``, event time, and the joined value (``None`` for an inner join without a
    table value at that time: drop or count it).
    """

    key: bytes
    ref: bytes
    time_ms: int
    value: Any


class EventTimeStreamTableJoin:
    """Joins stream records with the table version valid at their event time (see the module).

    Promises:
        * :meth:`join` and :meth:`update_table` return the stream records released by the
          call, in (event time, ref) order, each once; the buffer is state in ``buffer_store``
          (restored after a crash with the table), so a record is never lost or joined twice
          in the state; re-sent outputs carry the caller's deterministic ids.
        * A record is joined with ``table.get(key, as_of=t)``: with ``kind="inner"`` a record
          without a table value at ``t`` is released with value ``None``; with ``"left"`` the
          joiner gets ``None``.
    """

    def __init__(
        self,
        table: VersionedStore,
        buffer_store: KeyValueStore[bytes, bytes],
        joiner: Callable[[Any, Any], Any],
        *,
        kind: str = "inner",
        grace_ms: int = 0,
        namespace: bytes = b"",
    ) -> None:
        if kind not in ("inner", "left"):
            msg = f"join kind must be 'inner' or 'left', got {kind!r}"
            raise ValueError(msg)
        if grace_ms < 0:
            msg = f"grace_ms must be >= 0, got {grace_ms}"
            raise ValueError(msg)
        self.table = table
        self._store = buffer_store
        self._joiner = joiner
        self._inner = kind == "inner"
        self._grace = grace_ms
        self._b = namespace + BUFFER_TAG
        self._ended_key = namespace + ENDED_TAG

    def released_until(self) -> int:
        """Stream records at or before this time are joined (the table has passed them)."""
        if self._store.get(self._ended_key) is not None:
            return MAX_MS
        observed = self.table.observed_ms
        return MIN_MS if observed == MIN_MS else observed - self._grace

    def update_table(self, key: bytes, value: Any, time_ms: int) -> list[TemporalResult]:
        """Add a table version (``None`` deletes from ``time_ms`` on); the records released."""
        self.table.put(key, value, time_ms)
        return self._release()

    def end_table(self) -> list[TemporalResult]:
        """The table stream has ended: release every waiting record."""
        self._store.put(self._ended_key, b"1")
        return self._release()

    def join(self, key: bytes, value: Any, time_ms: int, ref: bytes) -> list[TemporalResult]:
        """Buffer a stream record (or join it now, when the table has passed its time)."""
        if time_ms <= self.released_until():
            return [self._result(key, ref, time_ms, value)]
        entry = orjson.dumps([key.hex(), value])
        self._store.put(self._b + encode_ms(time_ms) + ref, entry)
        return []

    def waiting(self) -> int:
        """How many stream records wait (a scan: for tests and tools)."""
        with self._store.range(self._b, prefix_end(self._b)) as entries:
            return sum(1 for _ in entries)

    def _release(self) -> list[TemporalResult]:
        bound = self.released_until()
        results: list[TemporalResult] = []
        n = len(self._b)
        while True:
            with self._store.range(self._b, until_inclusive(self._b, bound)) as entries:
                due = list(islice(entries, RELEASE_BATCH))
            if not due:
                return results
            for stored_key, stored in due:
                key_hex, value = orjson.loads(stored)
                ref, time_ms = stored_key[n + 8 :], decode_ms(stored_key, n)
                results.append(self._result(bytes.fromhex(key_hex), ref, time_ms, value))
            self._store.delete_all([k for k, _ in due])

    def _result(self, key: bytes, ref: bytes, time_ms: int, value: Any) -> TemporalResult:
        version = self.table.get(key, as_of=time_ms)
        table_value = None if version is None else version.value
        if table_value is None and self._inner:
            return TemporalResult(key, ref, time_ms, None)
        return TemporalResult(key, ref, time_ms, self._joiner(value, table_value))

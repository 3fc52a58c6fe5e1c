"""Count windows (Quix Streams' ``tumbling_count_window`` / ``hopping_count_window``).

Windows of a number of records per key rather than of time.

With ``CountWindows(size)`` every ``size`` records of a key form a window (tumbling); with
``CountWindows(size, step)`` a window starts at every ``step``-th record of the key and holds
``size`` records (hopping; a record is in up to ``ceil(size / step)`` windows). A window is
complete, and emitted, on its ``size``-th record; an incomplete window waits (at the end of
the input it stays open; it is not emitted).

A window's number is the index (from 0, per key) of its first record; its id is
``cw:<hex key>:<number>``. Its ``start`` is the smallest event time of its records and its
``end`` the largest plus 1 (samzapy's exclusive end; Quix reports the first and last
record's times). Count windows do not use the watermark: nothing is late.

Store layout (``namespace`` + tag)::

    0x00 'cn' + escape(key)            -> u64 number of records of the key so far
    0x00 'cw' + escape(key) + u64(n)   -> min time + max time + aggregate   (open windows)

>>> count_window_id(b"alice", 20)
'cw:616c696365:20'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from samzapy.operators.aggregators import Aggregator
from samzapy.operators.emission import EarlyFiring, early_id
from samzapy.operators.key_encoding import decode_ms, decode_u64, encode_ms, encode_u64, escape, unescape
from samzapy.operators.windows import Added, WindowResult
from samzapy.stores.base import KeyValueStore

COUNTER_TAG = b"\x00cn"
WINDOW_TAG = b"\x00cw"


def count_window_id(key: bytes, number: int) -> str:
    """The id of the count window of ``key`` that starts at its ``number``-th record."""
    return f"cw:{key.hex()}:{number}"


@dataclass(frozen=True, slots=True)
class CountWindows:
    """Windows of ``size`` records per key, one starting every ``step`` records.

    Default ``size``: tumbling.
    """

    size: int
    step: int = 0

    def __post_init__(self) -> None:
        if self.size <= 0:
            msg = f"count window size must be > 0, got {self.size}"
            raise ValueError(msg)
        step = self.step or self.size
        if not 0 < step <= self.size:
            msg = f"count window step must be in 1..size ({self.size}), got {self.step}, or records are lost"
            raise ValueError(msg)

    @property
    def every(self) -> int:
        """How many records apart two windows of a key start."""
        return self.step or self.size


class CountAggregation:
    """Aggregates values per key in count windows kept in a store (see the module).

    Promises:
        * :meth:`add` returns, in ``updates``, the final result of every window the record
          completed (``final=True``, id :func:`count_window_id`), which is deleted in the same
          call, and with ``emit="update"`` also the new value of every other window it changed
          (``final=False``, id ``None``).
        * With ``early_fire_ms``, :meth:`fire_early` returns the changed open windows' values
          every that many ms of processing time.
        * The windows depend only on the order of each key's records, so a task over the
          same input gives the same results, after a crash too (the state is the store's).
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        windows: CountWindows,
        aggregator: Aggregator,
        *,
        emit: Literal["final", "update"] = "final",
        early_fire_ms: int = 0,
        namespace: bytes = b"",
    ) -> None:
        if emit not in ("final", "update"):
            msg = f"emit must be 'final' or 'update', got {emit!r}"
            raise ValueError(msg)
        self._store = store
        self._size, self._every = windows.size, windows.every
        self._agg = aggregator
        self._updates = emit == "update"
        self._c, self._w = namespace + COUNTER_TAG, namespace + WINDOW_TAG
        self._early = None
        if early_fire_ms:
            self._early = EarlyFiring(store, early_fire_ms, self._read_window, namespace=namespace)

    def add(self, key: bytes, event_time_ms: int, value: Any) -> Added:
        """Count ``value`` (at ``event_time_ms``) into every window of ``key`` it belongs to."""
        escaped = escape(key)
        stored_n = self._store.get(self._c + escaped)
        n = 0 if stored_n is None else decode_u64(stored_n)
        first = max(0, n - self._size + 1)
        first += -first % self._every  # the oldest window that still takes record n
        results: list[WindowResult] = []
        writes: list[tuple[bytes, bytes | None]] = [(self._c + escaped, encode_u64(n + 1))]
        agg = self._agg
        for number in range(first, n + 1, self._every):
            wkey = self._w + escaped + encode_u64(number)
            old = None if number == n else self._store.get(wkey)
            if old is None:
                low = high = event_time_ms
                acc = agg.create(value)
            else:
                low, high = min(decode_ms(old), event_time_ms), max(decode_ms(old, 8), event_time_ms)
                acc = agg.add(agg.decode(old[16:]), value)
            if n - number + 1 == self._size:
                writes.append((wkey, None))
                if self._early is not None:
                    writes.append((self._early.marker(escaped + encode_u64(number)), None))
                rid = count_window_id(key, number)
                results.append(WindowResult(key, low, high + 1, agg.result(acc), rid, window=rid))
                continue
            writes.append((wkey, encode_ms(low) + encode_ms(high) + agg.encode(acc)))
            if self._early is not None:
                self._early.mark(escaped + encode_u64(number))
            if self._updates:
                update = WindowResult(key, low, high + 1, agg.result(acc), None, final=False)
                update.window = count_window_id(key, number)
                results.append(update)
        # One put or delete each, not put_all: the object cache absorbs single writes, while a
        # batch is written through (the counter and the open windows change at every view).
        store = self._store
        for key_, value_ in writes:
            if value_ is None:
                store.delete(key_)
            else:
                store.put(key_, value_)
        return Added(results, late=False)

    def fire_early(self, now_ms: int) -> list[WindowResult]:
        """Early results (see the class); ``[]`` without ``early_fire_ms``."""
        return [] if self._early is None else self._early.fire(now_ms)

    def _read_window(self, suffix: bytes) -> WindowResult | None:
        stored = self._store.get(self._w + suffix)
        if stored is None:
            return None
        key, offset = unescape(suffix)
        number = decode_u64(suffix, offset)
        value = self._agg.result(self._agg.decode(stored[16:]))
        window = count_window_id(key, number)
        rid = early_id(window, stored, late=False)
        start, end = decode_ms(stored), decode_ms(stored, 8) + 1
        return WindowResult(key, start, end, value, rid, final=False, window=window)

    def open_windows(self, key: bytes) -> list[WindowResult]:
        """The key's incomplete windows, oldest first (current values, ``final=False``)."""
        prefix = self._w + escape(key)
        with self._store.range(prefix, prefix + b"\xff" * 9) as entries:
            found = [(decode_u64(k, len(prefix)), v) for k, v in entries]
        agg = self._agg
        return [
            WindowResult(key, decode_ms(v), decode_ms(v, 8) + 1, agg.result(agg.decode(v[16:])), None, False)
            for _, v in found
        ]

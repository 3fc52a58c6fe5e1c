"""What the window operators share about *when* a window is emitted.

Early firing and the ids of non-final emissions.

Three emission modes exist for every window kind (see ``docs/patterns/window-aggregation.md``):

* ``final``: one result per window, when it closes (its id is the window's id);
* ``update``: the window's new value after every change (id from the input record, the
  window's id in :attr:`WindowResult.id <samzapy.operators.windows.WindowResult>` is
  ``None``; the task, or the pipeline's window stage, puts the window id,
  :func:`~samzapy.output_ids.window_id` of the window's bounds, into the message so
  downstream can upsert: a session's bounds so far), then the final result when it closes;
* early firing (Samza's early trigger): every ``early_fire_ms`` of processing time, the current
  value of every window changed since the last firing, then the final result.

Early firing is driven by processing time, so which early results a run emits is not
reproducible; what is reproducible is their bytes: an early result's id names the window, the
lateness flag and a digest of the aggregate, so the same id always carries the same bytes, and
the final results are the same as without early firing.

>>> early_id("w:61:0:10", b"3", late=False)
'w:61:0:10:e:9e251905a6d98e01'
"""

from __future__ import annotations

from collections.abc import Callable
from hashlib import blake2b
from itertools import islice
from typing import TYPE_CHECKING

from samzapy.operators.key_encoding import prefix_end
from samzapy.stores.base import KeyValueStore

if TYPE_CHECKING:
    from samzapy.operators.windows import WindowResult

#: Store tag of the "changed since the last early firing" markers.
DIRTY_TAG = b"\x00ed"
#: Markers read per store scan while firing.
FIRE_BATCH = 10_000


def early_id(window: str, encoded: bytes, *, late: bool) -> str:
    """The id of an early result of ``window`` (its final id) with aggregate bytes ``encoded``."""
    digest = blake2b(encoded, digest_size=8).hexdigest()
    return f"{window}:{'el' if late else 'e'}:{digest}"


class EarlyFiring:
    """Early firings: the windows changed since the last one, emitted every ``every_ms``.

    Remembers, in the store, which windows changed since the last early firing, and emits their
    current values every ``every_ms`` of processing time.

    Promises:
        * :meth:`mark` is one ``put`` of an empty value (absorbed by the object cache);
        * :meth:`fire` returns nothing until ``every_ms`` passed since the previous firing (the
          first call only starts the clock), then the current value of every marked window
          that still exists, in store-key order, and removes the markers. Markers are state:
          after a crash they are restored with the windows, so no change is forgotten.

    ``read(window_store_key)`` turns a marked window back into a non-final
    :class:`~samzapy.operators.windows.WindowResult` (``None`` when the window has closed).
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        every_ms: int,
        read: Callable[[bytes], WindowResult | None],
        *,
        namespace: bytes = b"",
    ) -> None:
        if every_ms <= 0:
            msg = f"early firing interval must be > 0 ms, got {every_ms}"
            raise ValueError(msg)
        self._store = store
        self._every = every_ms
        self._read = read
        self._prefix = namespace + DIRTY_TAG
        self._last: int | None = None

    def mark(self, window_store_key: bytes) -> None:
        """``window_store_key`` changed."""
        self._store.put(self._prefix + window_store_key, b"")

    def marker(self, window_store_key: bytes) -> bytes:
        """The store key of ``window_store_key``'s marker.

        Operators delete it with the window (in the same batch), so that no marker outlives its
        window.
        """
        return self._prefix + window_store_key

    def fire(self, now_ms: int) -> list[WindowResult]:
        """The changed windows' current values, when the interval has passed (see the class)."""
        if self._last is None:
            self._last = now_ms
            return []
        if now_ms - self._last < self._every:
            return []
        self._last = now_ms
        results: list[WindowResult] = []
        n = len(self._prefix)
        while True:
            with self._store.range(self._prefix, prefix_end(self._prefix)) as entries:
                marked = [k for k, _ in islice(entries, FIRE_BATCH)]
            if not marked:
                return results
            for marker in marked:
                found = self._read(marker[n:])
                if found is not None:
                    results.append(found)
            self._store.delete_all(marked)

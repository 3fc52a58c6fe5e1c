"""A versioned key-value store.

Every key's values by event time, for a history period (Kafka Streams'
``VersionedKeyValueStore``, KIP-889).

A :class:`VersionedStore` is a view over an ordinary bytes store (configure the store without
serdes: ``context.get_store(name)`` then holds bytes), so its changelog, restore, object cache
and local checkpoints are the store's own: every version is an entry, restored like any other.

Layout (``namespace`` + tag, keys sorting by key then time)::

    0x00 'vv' + escape(key) + valid_from  ->  0x01 + encoded value   (0x00 alone: a delete)
    0x00 'vt'                              ->  the largest timestamp put so far (observed time)

Semantics (as Kafka Streams'):

* a version is valid from its timestamp until the next version's timestamp of the same key;
* ``put`` of a timestamp older than ``observed time - history`` is refused (returns False):
  it could only change the past beyond the history;
* a version that ended at or before ``observed time - history`` is purged when its key is
  written (the version valid at that bound is kept, so ``as_of`` answers stay correct for
  the whole history);
* ``get(key, as_of=t)`` for a ``t`` before ``observed time - history`` returns ``None``: the
  answer may have been purged.

>>> from samzapy.stores.memory import InMemoryStore
>>> table = VersionedStore(InMemoryStore(), history_ms=1000)
>>> table.put(b"u1", {"zip": "111"}, 100), table.put(b"u1", {"zip": "222"}, 300)
(True, True)
>>> table.get(b"u1", as_of=299).value, table.get(b"u1").value, table.get(b"u1", as_of=99)
({'zip': '111'}, {'zip': '222'}, None)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson

from samzapy.operators.key_encoding import MAX_MS, MIN_MS, decode_ms, encode_ms, escape
from samzapy.stores.base import KeyValueStore

VERSION_TAG = b"\x00vv"
TIME_TAG = b"\x00vt"
_DELETE = b"\x00"
_VALUE = b"\x01"


@dataclass(frozen=True, slots=True)
class Version:
    """A key's value valid in ``[valid_from, valid_to)``.

    ``valid_to`` is ``MAX_MS`` for the latest version.
    """

    value: Any
    valid_from: int
    valid_to: int


class VersionedStore:
    """Versions of each key by event time over a bytes store (see the module).

    Promises:
        * the same puts in the same order give the same store contents (entries and bytes),
          so a restored or replayed store equals the original;
        * ``get`` answers from the versions only: the order in which versions of different
          times arrived does not matter, as long as none was refused as too old.
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        history_ms: int,
        *,
        namespace: bytes = b"",
        encode: Callable[[Any], bytes] = orjson.dumps,
        decode: Callable[[bytes], Any] = orjson.loads,
    ) -> None:
        if history_ms < 0:
            msg = f"history_ms must be >= 0, got {history_ms}"
            raise ValueError(msg)
        self._store = store
        self.history_ms = history_ms
        self._v = namespace + VERSION_TAG
        self._t = namespace + TIME_TAG
        self._encode, self._decode = encode, decode
        stored = store.get(self._t)
        #: The largest timestamp put so far (``MIN_MS`` before any).
        self.observed_ms: int = MIN_MS if stored is None else decode_ms(stored)

    def history_start(self) -> int:
        """Versions that ended at or before this time may be gone."""
        return MIN_MS if self.observed_ms == MIN_MS else self.observed_ms - self.history_ms

    def put(self, key: bytes, value: Any, timestamp_ms: int) -> bool:
        """Add the version of ``key`` valid from ``timestamp_ms`` (``None`` deletes from then on).

        Replaces a version of the same time. False (nothing written) when the timestamp is older
        than the history.
        """
        if timestamp_ms < self.history_start():
            return False
        data = _DELETE if value is None else _VALUE + self._encode(value)
        self._store.put(self._v + escape(key) + encode_ms(timestamp_ms), data)
        if timestamp_ms > self.observed_ms:
            self.observed_ms = timestamp_ms
            self._store.put(self._t, encode_ms(timestamp_ms))
        self._purge(key)
        return True

    def delete(self, key: bytes, timestamp_ms: int) -> bool:
        """``put(key, None, timestamp_ms)``."""
        return self.put(key, None, timestamp_ms)

    def get(self, key: bytes, as_of: int | None = None) -> Version | None:
        """The latest version of ``key``, or with ``as_of`` the one valid at that time.

        ``None`` when there is none, it is a delete, or ``as_of`` is before the history.
        """
        if as_of is not None and as_of < self.history_start():
            return None
        prefix = self._v + escape(key)
        upper = MAX_MS if as_of is None else as_of
        found = self._last_at_or_before(prefix, upper)
        if found is None or found[1] == _DELETE:
            return None
        valid_from = decode_ms(found[0], len(prefix))
        return Version(self._decode(found[1][1:]), valid_from, self._next_from(prefix, valid_from))

    def versions(self, key: bytes) -> list[Version]:
        """Every stored version of ``key`` (deletes included, value ``None``), oldest first."""
        prefix = self._v + escape(key)
        with self._store.range(prefix, prefix + b"\xff" * 9) as entries:
            found = [(decode_ms(k, len(prefix)), v) for k, v in entries]
        ends = [t for t, _ in found[1:]] + [MAX_MS]
        return [
            Version(None if v == _DELETE else self._decode(v[1:]), t, end)
            for (t, v), end in zip(found, ends, strict=True)
        ]

    def _last_at_or_before(self, prefix: bytes, time_ms: int) -> tuple[bytes, bytes] | None:
        # The stores have no reverse range; a key has few versions within its history.
        with self._store.range(prefix, prefix + encode_ms(time_ms) + b"\x00") as entries:
            last = None
            for entry in entries:
                last = (entry.key, entry.value)
        return last

    def _next_from(self, prefix: bytes, valid_from: int) -> int:
        if valid_from == MAX_MS:
            return MAX_MS
        with self._store.range(prefix + encode_ms(valid_from + 1), prefix + b"\xff" * 9) as entries:
            nxt = next(iter(entries), None)
        return MAX_MS if nxt is None else decode_ms(nxt[0], len(prefix))

    def _purge(self, key: bytes) -> None:
        """Delete the versions of ``key`` that ended at or before the history start."""
        bound = self.history_start()
        if bound == MIN_MS:
            return
        prefix = self._v + escape(key)
        with self._store.range(prefix, prefix + encode_ms(bound) + b"\x00") as entries:
            old = [k for k, _ in islice(entries, 10_000)]
        # The last of them is still valid at the bound (its successor starts after it).
        if len(old) > 1:
            self._store.delete_all(old[:-1])

"""The object cache: an LRU of deserialised values with write-behind of dirty entries."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

from samzapy.metrics import MetricsGroup
from samzapy.stores.base import KeyValueIterator, KeyValueStore
from samzapy.stores.wrapped import WrappedStore

K = TypeVar("K")
V = TypeVar("V")

#: Marks a key missing from the cache (``None`` is a cached deletion or absent key).
_ABSENT = object()


class CachedStore(WrappedStore[K, V], Generic[K, V]):
    """An LRU cache of deserialised values in front of a store (Samza's ``CachedStore``).

    Purpose: reads of hot keys skip the serde and the engine; a key written many times between
    flushes reaches the store (and the changelog) once, with its last value — the main saving
    of samzapy, since every changelog record costs a produce.

    Corner cases:
      * values are cached by reference: **do not mutate a value after ``put``** (or after
        ``get``) — put a new object instead, or the cache and the store will disagree;
      * keys must be hashable, and equal keys must serialise to the same bytes;
      * ``put(k, None)`` caches the deletion; absent keys read from below are cached too;
      * ``range`` and ``all`` write every dirty entry down first, so they see every write;
      * ``put_all``/``delete_all`` write through (after the dirty entries) as one batch, so
        they stay atomic on the engine; the keys they delete leave the cache.

    Implementation: an ``OrderedDict`` in LRU order holds at most ``cache_size`` entries; an
    ordered dict of dirty keys is written down as one ``put_all`` (one RocksDB WriteBatch plus
    the changelog sends) when it reaches ``write_batch_size`` entries, when a dirty entry is
    evicted, and on ``flush``. Thread safety: none; one task owns it.
    """

    def __init__(
        self,
        inner: KeyValueStore[K, V],
        cache_size: int,
        write_batch_size: int,
        metrics: MetricsGroup | None = None,
    ) -> None:
        if cache_size < 1 or write_batch_size < 1:
            msg = f"cache_size ({cache_size}) and write_batch_size ({write_batch_size}) must be >= 1"
            raise ValueError(msg)
        super().__init__(inner)
        self.cache_size = cache_size
        self.write_batch_size = write_batch_size
        self._cache: OrderedDict[K, V | None] = OrderedDict()
        self._dirty: dict[K, None] = {}
        metrics = metrics or MetricsGroup("unnamed-store")
        self._hits = metrics.counter("cache-hits")
        self._misses = metrics.counter("cache-misses")
        metrics.gauge("dirty-count", lambda: len(self._dirty))
        metrics.gauge("cache-size", lambda: len(self._cache))

    def get(self, key: K) -> V | None:
        """The value of ``key``, from the cache when there."""
        cache = self._cache
        value = cache.get(key, _ABSENT)
        if value is not _ABSENT:
            self._hits.value += 1
            cache.move_to_end(key)
            return value  # type: ignore[return-value]
        self._misses.value += 1
        value = self.inner.get(key)
        cache[key] = value  # _insert inline: a call less per miss (every new window)
        if len(cache) > self.cache_size:
            self._evict()
        return value

    def put(self, key: K, value: V | None) -> None:
        """Cache the new value and mark it dirty; written down later, once."""
        dirty = self._dirty
        dirty[key] = None  # a key already dirty keeps its place: keys are written as one batch
        cache = self._cache
        cache[key] = value
        cache.move_to_end(key)
        if len(cache) > self.cache_size:
            self._evict()  # may write the dirty entries down
        if len(dirty) >= self.write_batch_size:
            self._write_dirty()

    def _insert(self, key: K, value: V | None) -> None:
        cache = self._cache
        cache[key] = value
        cache.move_to_end(key)
        if len(cache) > self.cache_size:
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently used entry, writing the dirty ones down first if it is one."""
        cache = self._cache
        oldest = next(iter(cache))
        if oldest in self._dirty:
            self._write_dirty()
        del cache[oldest]

    def _write_dirty(self) -> None:
        if not self._dirty:
            return
        cache = self._cache
        entries = [(key, cache[key]) for key in self._dirty]
        self._dirty = {}
        self.inner.put_all(entries)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Write every entry through as one batch (after the dirty ones).

        Cache the values written and forget the keys deleted.
        """
        entries = list(entries)
        self._write_dirty()
        self.inner.put_all(entries)
        cache, insert = self._cache, self._insert
        for key, value in entries:
            if value is None:
                # Batch deletes are mostly purges (closed windows, expired join entries): their
                # keys are not read again, and caching them would evict live entries.
                cache.pop(key, None)
            else:
                insert(key, value)

    def delete_all(self, keys: Iterable[K]) -> None:
        """Delete every key through as one batch (after the dirty ones).

        The keys leave the cache (see :meth:`put_all`).
        """
        keys = list(keys)
        self._write_dirty()
        self.inner.put_all([(key, None) for key in keys])
        pop = self._cache.pop
        for key in keys:
            pop(key, None)

    def delete_scanned(self, keys: list[K], from_key: K, to_key: K) -> None:
        """:meth:`delete_all` of ``keys``, every entry of ``[from_key, to_key)``, as a range below.

        ``range`` wrote the dirty entries down before the caller's scan, so the store below
        holds every entry of the range and the scan saw them all (base class).
        """
        self._write_dirty()
        self.inner.delete_scanned(keys, from_key, to_key)
        pop = self._cache.pop
        for key in keys:
            pop(key, None)

    def delete(self, key: K) -> None:
        """Cache the deletion (written down as a delete later)."""
        self.put(key, None)

    def range(self, from_key: K, to_key: K) -> KeyValueIterator[K, V]:
        """Entries with ``from_key <= key < to_key``, after writing dirty entries down."""
        self._write_dirty()
        return self.inner.range(from_key, to_key)

    def all(self) -> KeyValueIterator[K, V]:
        """Every entry, after writing dirty entries down."""
        self._write_dirty()
        return self.inner.all()

    def flush(self) -> None:
        """Write every dirty entry down, then flush the inner store."""
        self._write_dirty()
        self.inner.flush()

    def invalidate(self) -> None:
        """Forget every cached entry (after a restore rewrote the store underneath).

        Dirty entries are dropped too: call :meth:`flush` first to keep them.
        """
        self._cache.clear()
        self._dirty = {}
        super().invalidate()

    def close(self) -> None:
        """Flush, then close the inner store."""
        self.flush()
        self.inner.close()

"""The changelog layer: every write to the store is also sent to its changelog partition."""

from __future__ import annotations

from collections.abc import Iterable

from samzapy.stores.base import KeyValueIterator, KeyValueStore
from samzapy.stores.changelog import ChangelogWriter
from samzapy.stores.wrapped import WrappedStore

#: With coalescing, pending changes are sent early once this many keys are pending (bounds
#: the memory they hold between two commits).
MAX_PENDING = 100_000
#: With coalescing, how many keys read as absent are remembered per store (cleared when full:
#: a key forgotten only costs the records it would have saved). A key is read (and missed)
#: shortly before it is written down, within the object cache's write batch, and leaves this
#: set then; keys read and never written (a join probing for absent keys) fill it, so it is
#: kept small (~1.5 MB at most per store).
MAX_ABSENT = 16_384


class LoggedStore(WrappedStore[bytes, bytes]):
    """A store layer that sends every change to the changelog.

    Writes to the inner store, then sends the change (key, value bytes; a delete as a tombstone)
    to the changelog (Samza's ``LoggedStore``).

    Corner cases: reads pass through untouched (a ``get`` that misses is noted, see below); a
    change is sent after the inner write, so a crash in between leaves the changelog behind the
    store, never ahead of it — restore throws away anything past the checkpoint anyway. Sends
    are asynchronous: they are durable once the producer is flushed at commit. Not thread-safe.

    Coalescing (``coalesce=True``; ``stores.<store>.changelog.coalesce``, true by default, so
    the store factory passes it on unless a job turns it off): the inner store is
    written at once, but changes are kept per key (last value wins) and sent at :meth:`flush`
    (the commit) or when ``max_pending`` keys are pending, so a key changed many times between
    two commits costs one changelog record, and a window created and closed within one commit
    costs nothing at all when its key was read as absent before it was first written (see
    below), else its tombstones only. The changelog still ends each commit with exactly the
    store's state (restore replays to the checkpointed offset; any subset sent after it is
    trimmed).

    Keys new since the last send (coalescing): a ``get`` that finds nothing for a key with no
    pending change proves the changelog holds no live value of it either (outside pending
    changes, the store and the changelog agree), so the layer remembers the key as *absent*
    (at most :data:`MAX_ABSENT`). A value written to such a key is *fresh*: deleting it
    before the pending changes are sent drops the change instead of sending a tombstone,
    since no earlier value of the key reached the changelog. A delete of a key known absent
    is not logged either. A key never read through this layer is not known absent, and
    keeps its tombstone; nor is any key of a store in RocksDB's TTL mode (an expired entry
    reads as absent while the changelog still holds it). Anything that rewrites the store
    underneath (a restore) must call :meth:`invalidate`, which forgets all of it.
    """

    def __init__(
        self,
        inner: KeyValueStore[bytes, bytes],
        changelog: ChangelogWriter,
        *,
        coalesce: bool = False,
        max_pending: int = MAX_PENDING,
    ) -> None:
        super().__init__(inner)
        self.changelog = changelog
        self._pending: dict[bytes, bytes | None] | None = {} if coalesce else None
        self._max_pending = max_pending
        # Coalescing only (class docstring): keys known to have no value in the store or the
        # changelog; and the pending changes of fresh keys, kept apart from ``_pending`` (no
        # key is in both) so that telling them apart costs no memory per key.
        self._absent: dict[bytes, None] = {}
        self._fresh: dict[bytes, bytes] = {}
        # A store in RocksDB's TTL mode drops entries at compaction without a tombstone: a miss
        # there does not prove the changelog has no value, so no key is taken as absent.
        self._track_absent = getattr(getattr(inner, "options", None), "ttl_ms", None) is None

    def get(self, key: bytes) -> bytes | None:
        """The inner store's value; with coalescing, a miss marks ``key`` absent."""
        value = self.inner.get(key)
        if value is None:
            pending = self._pending
            if pending is not None and key not in pending and self._track_absent:
                absent = self._absent
                if len(absent) >= MAX_ABSENT:
                    absent.clear()
                absent[key] = None
        return value

    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator[bytes, bytes]:
        """The inner store's entries (reads are not logged; ``get`` is overridden for misses)."""
        return self.inner.range(from_key, to_key)

    def all(self) -> KeyValueIterator[bytes, bytes]:
        """Every entry of the inner store."""
        return self.inner.all()

    def put(self, key: bytes, value: bytes | None) -> None:
        """Write inner, then log the change."""
        self.inner.put(key, value)
        self._log(key, value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write inner in one batch, then log every change in order."""
        entries = list(entries)
        self.inner.put_all(entries)
        pending = self._pending
        if pending is None:
            send = self.changelog.send
            for key, value in entries:
                send(key, value)
            return
        absent, fresh = self._absent, self._fresh
        if not absent and not fresh:
            pending.update(entries)
        else:
            for key, value in entries:  # _pend inline: a call less per change of a batch
                if key in fresh:
                    if value is None:
                        del fresh[key]
                    else:
                        fresh[key] = value
                elif key in absent:
                    if value is not None:
                        del absent[key]
                        fresh[key] = value
                else:
                    pending[key] = value
        if len(pending) + len(fresh) >= self._max_pending:
            self._send_pending()

    def delete_scanned(self, keys: list[bytes], from_key: bytes, to_key: bytes) -> None:
        """Delete the range inner (see the base class), then log a tombstone per key.

        The same changes as :meth:`put_all` of ``(key, None)`` for each key.
        """
        self.inner.delete_scanned(keys, from_key, to_key)
        pending = self._pending
        if pending is None:
            send = self.changelog.send
            for key in keys:
                send(key, None)
            return
        absent, fresh = self._absent, self._fresh
        for key in keys:  # put_all's rules for a delete, inline
            if key in fresh:
                del fresh[key]  # created and deleted since the last send: nothing to log
            elif key not in absent:  # a delete of a key known absent changes nothing
                pending[key] = None
        if len(pending) + len(fresh) >= self._max_pending:
            self._send_pending()

    def delete(self, key: bytes) -> None:
        """Delete inner, then log a tombstone."""
        self.inner.delete(key)
        self._log(key, None)

    def _log(self, key: bytes, value: bytes | None) -> None:
        pending = self._pending
        if pending is None:
            self.changelog.send(key, value)
            return
        fresh = self._fresh
        self._pend(pending, self._absent, fresh, key, value)
        if len(pending) + len(fresh) >= self._max_pending:
            self._send_pending()

    @staticmethod
    def _pend(
        pending: dict[bytes, bytes | None],
        absent: dict[bytes, None],
        fresh: dict[bytes, bytes],
        key: bytes,
        value: bytes | None,
    ) -> None:
        """Keep one change pending, dropping what the changelog does not need (class doc).

        :meth:`put_all` has the same rules inline.
        """
        if key in fresh:
            if value is None:  # created and deleted since the last send: nothing to log
                # Not taken as absent again: closed windows' keys are not written again, and
                # would only hold memory until the next clear.
                del fresh[key]
            else:
                fresh[key] = value
        elif key in absent:
            if value is not None:  # a delete of a key with no value changes nothing
                del absent[key]
                fresh[key] = value
        else:
            pending[key] = value

    def _send_pending(self) -> None:
        pending, fresh = self._pending, self._fresh
        if pending is None:  # not coalescing: every change was sent as it came
            return
        if pending or fresh:
            self._pending, self._fresh = {}, {}  # sent: every key's value is in the changelog
            send = self.changelog.send
            for key, value in pending.items():
                send(key, value)
            for key, fresh_value in fresh.items():
                send(key, fresh_value)

    def invalidate(self) -> None:
        """Forget the changes not sent yet.

        The engine was rewritten underneath, or the task is abandoned:
        :meth:`~samzapy.stores.engine.StorageEngine.abandon`.
        """
        if self._pending:
            self._pending = {}
        self._absent.clear()
        self._fresh = {}
        super().invalidate()

    def flush(self) -> None:
        """Send the pending changes, then flush the inner store.

        Send the pending changes (coalescing), then flush the inner store (the producer is
        flushed by the container at commit).
        """
        self._send_pending()
        self.inner.flush()

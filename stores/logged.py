"""The changelog layer: every write to the store is also sent to its changelog partition."""

from __future__ import annotations

from collections.abc import Iterable

from samzapy.stores.base import KeyValueStore
from samzapy.stores.changelog import ChangelogWriter
from samzapy.stores.wrapped import WrappedStore

#: With coalescing, pending changes are sent early once this many keys are pending (bounds
#: the memory they hold between two commits).
MAX_PENDING = 100_000


class LoggedStore(WrappedStore[bytes, bytes]):
    """A store layer that sends every change to the changelog.

    Writes to the inner store, then sends the change (key, value bytes; a delete as a tombstone)
    to the changelog (Samza's ``LoggedStore``).

    Corner cases: reads pass through untouched (not overridden); a change is sent after the inner write, so a
    crash in between leaves the changelog behind the store, never ahead of it — restore throws
    away anything past the checkpoint anyway. Sends are asynchronous: they are durable once the
    producer is flushed at commit. Not thread-safe.

    Coalescing (``coalesce=True``; ``stores.<store>.changelog.coalesce``, true by default, so
    the store factory passes it on unless a job turns it off): the inner store is
    written at once, but changes are kept per key (last value wins) and sent at :meth:`flush`
    (the commit) or when ``max_pending`` keys are pending, so a key changed many times between
    two commits costs one changelog record, and a window created and closed within one commit
    costs its tombstones only. The changelog still ends each commit with exactly the store's
    state (restore replays to the checkpointed offset; any subset sent after it is trimmed).
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
        pending.update(entries)
        if len(pending) >= self._max_pending:
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
        pending[key] = value
        if len(pending) >= self._max_pending:
            self._send_pending()

    def _send_pending(self) -> None:
        pending = self._pending
        if pending:
            self._pending = {}
            send = self.changelog.send
            for key, value in pending.items():
                send(key, value)

    def invalidate(self) -> None:
        """Forget the changes not sent yet.

        The engine was rewritten underneath, or the task is abandoned:
        :meth:`~samzapy.stores.engine.StorageEngine.abandon`.
        """
        if self._pending:
            self._pending = {}
        super().invalidate()

    def flush(self) -> None:
        """Send the pending changes, then flush the inner store.

        Send the pending changes (coalescing), then flush the inner store (the producer is
        flushed by the container at commit).
        """
        self._send_pending()
        self.inner.flush()

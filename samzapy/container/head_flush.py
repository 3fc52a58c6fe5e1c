"""Stores flushed between polls while the input is caught up (``stores.<store>.flush.at.head``).

A commit flushes every store first: the object cache's dirty entries are written to RocksDB
and the changelog, and the changes coalesced since the last commit
(``stores.<store>.changelog.coalesce``, the default) are sent. In the ad-click join at 5k
events/s that is ~10k records at once, 50-90 ms during which no input is processed: most of
the join's p99. Batching and coalescing pay off while a job is behind (a key changed many
times, or put and deleted, within one commit costs one record); a job at the head of its
input has time to spare, and what it needs is short stalls.

So a store with ``flush.at.head=true`` is flushed after a poll that found the input caught
up (fewer records than the poll could return), at most every :data:`MIN_INTERVAL_S`: in
bursts as small as that much work, which leaves the commit little to write. While the job
is catching up (full polls) it batches and coalesces as before. Flushing early is what a
full object cache or ``changelog.coalesce=false`` does anyway: a restore trims the changelog
past the checkpoint, so the state after a crash is the same. Like those, it sends changelog records between
commits, which go out before the next fence check (see ``samzapy.container.fencing``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samzapy.container.task_instance import TaskInstance
    from samzapy.stores.engine import StorageEngine

#: At most one flush at the head this often. Each flush starts a new producer batch per
#: changelog partition, and each new batch wakes kafka-python's sender thread (a syscall and a
#: hand-over of the GIL): flushing after every poll (~100 a second at 7.5k events/s) spent
#: most of its time there (py-spy). 50 ms keeps each flush small (a few ms) and the wake-ups few.
MIN_INTERVAL_S = 0.05


class HeadFlusher:
    """The stores (``StorageEngine`` s) to flush after a caught-up poll.

    Not thread-safe: the container's loop owns it.
    """

    def __init__(
        self,
        stores: list[StorageEngine[Any, Any]],
        min_interval_s: float = MIN_INTERVAL_S,
        names: set[str] | None = None,
    ) -> None:
        self.stores = stores
        self._names = names or set()  # the stores :meth:`add` takes from a task
        self._min_interval_s = min_interval_s
        self._last = float("-inf")

    @classmethod
    def for_tasks(cls, tasks: Iterable[TaskInstance], names: set[str]) -> HeadFlusher | None:
        """A flusher over the stores called one of ``names`` in ``tasks``; ``None`` if none."""
        stores = [store for task in tasks for name, store in task.stores.items() if name in names]
        return cls(stores, names=names) if stores else None

    def add(self, task: TaskInstance) -> None:
        """Flush ``task``'s stores of the configured names too (a task that started at runtime)."""
        self.stores.extend(store for name, store in task.stores.items() if name in self._names)

    def after_poll(self, polled: int, max_records: int, now: float | None = None) -> bool:
        """Flush the stores when the input is caught up; returns whether it flushed.

        The input is caught up when the poll returned fewer than ``max_records`` records; the
        stores are flushed then if the last flush here is ``min_interval_s`` old.
        """
        if polled >= max_records:
            return False
        now = time.monotonic() if now is None else now
        if now - self._last < self._min_interval_s:
            return False
        self._last = now
        for store in self.stores:
            store.flush()
        return True

    def drop(self, remaining_tasks: Iterable[TaskInstance]) -> None:
        """Forget the stores of tasks no longer run here (fenced): nothing of theirs is written."""
        keep = {id(store) for task in remaining_tasks for store in task.stores.values()}
        self.stores = [store for store in self.stores if id(store) in keep]

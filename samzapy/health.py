"""What a container is doing, for ``/health``: restoring, running, failed or stopped.

The container sets the status at its transitions (from its own thread); the HTTP server of
the Prometheus reporter reads it from another, so every access takes a lock. Reading costs a
dict copy: health checks never slow the run loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

RESTORING = "restoring"
RUNNING = "running"
FAILED = "failed"
STOPPED = "stopped"
STATUSES = (RESTORING, RUNNING, FAILED, STOPPED)
#: Changes :meth:`ContainerStatus.events` keeps.
EVENTS_KEPT = 40


class ContainerStatus:
    """The status of a container and of each of its tasks.

    A container is ``restoring`` from its start until every task's stores are restored and
    input starts flowing, then ``running``; ``failed`` when the job stopped on an error (the
    error text is kept), ``stopped`` after a clean stop. ``failed`` is final: a later
    :meth:`stopped` keeps it.

    While the Kafka broker is unreachable (:mod:`samzapy.kafka.outage`) the snapshot carries
    ``broker: "unreachable since HH:MM:SS"`` (and ``broker_unreachable_since``, epoch
    seconds); the status itself stays as it was, so that a liveness probe does not restart a
    container that is correctly waiting for its broker.

    >>> status = ContainerStatus()
    >>> status.restoring(["Partition 0"]); status.running(); status.failed("boom"); status.stopped()
    >>> status.snapshot()["status"], status.snapshot()["tasks"], status.healthy
    ('failed', {'Partition 0': 'failed'}, False)
    >>> status.broker_unreachable(0.0); status.snapshot()["broker"].startswith("unreachable since ")
    True
    >>> status.broker_unreachable(None); "broker" in status.snapshot()
    False
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._status = RESTORING
        self._tasks: dict[str, str] = {}
        self._error: str | None = None
        self._since = time.time()
        self._standby: dict[str, Any] | None = None
        self._broker_down_since: float | None = None
        self._membership: dict[str, Any] | None = None
        #: (epoch s, text) of the latest changes, for the status page: ownership, states, errors
        self._events: deque[tuple[float, str]] = deque(maxlen=EVENTS_KEPT)

    def restoring(self, tasks: Iterable[str]) -> None:
        """Start-up: these tasks are having their stores restored."""
        with self._lock:
            self._tasks = dict.fromkeys(tasks, RESTORING)
            self._set(RESTORING)
            self._event(f"started: restoring {len(self._tasks)} task(s)")

    def running(self) -> None:
        """Every task is restored and processing."""
        self._all(RUNNING)

    def failed(self, error: str) -> None:
        """The container stopped on ``error`` (final)."""
        with self._lock:
            self._error = error
            self._event(f"failed: {error[:300]}")
        self._all(FAILED)

    def standby(self, tasks: Iterable[str], status: str, error: str | None = None) -> None:
        """The standby replicas of ``tasks`` are ``running`` or ``failed`` (with ``error``).

        A failed standby leaves the container healthy (its own tasks go on) but shows in
        ``/health``: a failover of those tasks would restore from the changelog.
        """
        with self._lock:
            tasks = list(tasks)
            if self._standby is None or self._standby["status"] != status:
                self._event(
                    f"standby copies of {len(tasks)} task(s): {status}" + (f" ({error})" if error else "")
                )
            self._standby = {"status": status, "tasks": tasks, "error": error}

    def task_state(self, task: str, status: str) -> None:
        """Group mode: one task's status changed (``restoring``, ``running``).

        A task that left this member is removed with :meth:`task_gone`.
        """
        with self._lock:
            if self._tasks.get(task) != status:
                self._event(f"{task}: {'assigned, restoring' if status == RESTORING else status}")
            self._tasks[task] = status

    def task_gone(self, task: str) -> None:
        """Group mode: the task left this member."""
        with self._lock:
            if self._tasks.pop(task, None) is not None:
                self._event(f"{task}: moved away from this member")

    def membership(self, info: dict[str, Any] | None) -> None:
        """Group mode: the member's group, generation and rebalance state, for ``/health``."""
        with self._lock:
            old = (self._membership or {}).get("generation")
            if info is not None and info.get("generation") not in (None, old):
                self._event(f"group generation {info['generation']}")
            self._membership = info

    def broker_unreachable(self, since: float | None) -> None:
        """The broker has been unreachable since ``since`` (epoch seconds); ``None``: it answers again."""
        with self._lock:
            if (since is None) != (self._broker_down_since is None):
                self._event("broker unreachable" if since is not None else "broker reachable again")
            self._broker_down_since = since

    def stopped(self) -> None:
        """The container stopped cleanly (unless it failed before)."""
        with self._lock:
            if self._status == FAILED:
                return
        self._all(STOPPED)

    def _all(self, status: str) -> None:
        with self._lock:
            self._tasks = dict.fromkeys(self._tasks, status)
            self._set(status)

    def _set(self, status: str) -> None:
        if status != self._status:
            self._status = status
            self._since = time.time()
            if status in (RUNNING, STOPPED):
                self._event(status)

    def _event(self, text: str) -> None:
        self._events.append((time.time(), text))

    def events(self) -> list[tuple[float, str]]:
        """The latest changes (ownership, statuses, errors), oldest first, as (epoch s, text)."""
        with self._lock:
            return list(self._events)

    @property
    def status(self) -> str:
        """The container's status, one of :data:`STATUSES`."""
        with self._lock:
            return self._status

    @property
    def healthy(self) -> bool:
        """Whether the container is running (``/health`` answers 200 then, 503 otherwise)."""
        return self.status == RUNNING

    def snapshot(self) -> dict[str, Any]:
        """The status as a JSON-ready dict.

        ``{status, since (epoch s), tasks: {task: status}, error}``,
        ``standby: {status, tasks, error}`` when the container keeps standby replicas,
        ``membership`` in group mode (group, generation, rebalance state), and ``broker`` with
        ``broker_unreachable_since`` while the broker is unreachable.
        """
        with self._lock:
            body = {
                "status": self._status,
                "since": round(self._since, 3),
                "tasks": dict(self._tasks),
                "error": self._error,
            }
            if self._standby is not None:
                body["standby"] = dict(self._standby)
            if self._membership is not None:
                body["membership"] = dict(self._membership)
            if self._broker_down_since is not None:
                since = self._broker_down_since
                body["broker"] = f"unreachable since {time.strftime('%H:%M:%S', time.localtime(since))}"
                body["broker_unreachable_since"] = round(since, 3)
            return body

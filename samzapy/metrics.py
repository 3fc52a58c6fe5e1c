"""A small metrics registry: counters, gauges and timers grouped by owner, with JSON snapshots.

Names follow Samza's (``process-calls``, ``puts``, ``restored-messages``...). Reporters read
:meth:`MetricsRegistry.snapshot` for values, and :meth:`MetricsRegistry.groups` with
:meth:`MetricsGroup.counter_names` when they need to know which metrics are counters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Counter:
    """A monotonically increasing count."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self, n: int = 1) -> None:
        """Add ``n``."""
        self.value += n


class Gauge:
    """A value set from outside, or computed on read by a function."""

    __slots__ = ("value", "_fn")

    def __init__(self, fn: Callable[[], Any] | None = None) -> None:
        self.value: Any = 0
        self._fn = fn

    def set(self, value: Any) -> None:
        """Set the current value."""
        self.value = value

    def read(self) -> Any:
        """The current value."""
        return self._fn() if self._fn is not None else self.value


class MetricsGroup:
    """The metrics of one owner (a store, a task, the container), by name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}

    def counter(self, name: str) -> Counter:
        """The counter called ``name``, created at zero on first use."""
        found = self._counters.get(name)
        if found is None:
            found = self._counters[name] = Counter()
        return found

    def gauge(self, name: str, fn: Callable[[], Any] | None = None) -> Gauge:
        """The gauge called ``name``, created on first use (computed by ``fn`` if given)."""
        found = self._gauges.get(name)
        if found is None:
            found = self._gauges[name] = Gauge(fn)
        return found

    def counter_names(self) -> frozenset[str]:
        """The names of the group's counters (monotonic), as of now."""
        return frozenset(list(self._counters))

    def gauge_names(self) -> frozenset[str]:
        """The names of the group's gauges, as of now."""
        return frozenset(list(self._gauges))

    def snapshot(self) -> dict[str, Any]:
        """Current values of every metric of the group."""
        values: dict[str, Any] = {n: c.value for n, c in self._counters.items()}
        values.update({n: g.read() for n, g in self._gauges.items()})
        return values


class MetricsRegistry:
    """All metric groups of a container. Thread-safe to create groups; updates are not locked
    (single writer per group)."""

    def __init__(self) -> None:
        self._groups: dict[str, MetricsGroup] = {}
        self._lock = threading.Lock()

    def group(self, name: str) -> MetricsGroup:
        """The group called ``name`` (e.g. ``store.counts.Partition 0``), created on first use."""
        with self._lock:
            found = self._groups.get(name)
            if found is None:
                found = self._groups[name] = MetricsGroup(name)
            return found

    def groups(self) -> list[MetricsGroup]:
        """Every group of the registry, in creation order (a copy of the list: safe to iterate
        while the container creates more)."""
        with self._lock:
            return list(self._groups.values())

    def counter_names(self) -> set[tuple[str, str]]:
        """``(group, metric)`` of every counter of every group.

        >>> registry = MetricsRegistry()
        >>> registry.group("container").counter("commit-calls").inc()
        >>> _ = registry.group("container").gauge("tasks")
        >>> registry.counter_names()
        {('container', 'commit-calls')}
        """
        return {(g.name, name) for g in self.groups() for name in g.counter_names()}

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Current values of every group, as plain JSON-serialisable dicts."""
        with self._lock:
            groups = list(self._groups.values())
        return {g.name: g.snapshot() for g in groups}

"""A small metrics registry: counters, gauges and timers grouped by owner, with JSON snapshots.

Names follow Samza's (``process-calls``, ``puts``, ``restored-messages``...). Reporters read
:meth:`MetricsRegistry.snapshot` for values, and :meth:`MetricsRegistry.groups` with
:meth:`MetricsGroup.counter_names` when they need to know which metrics are counters.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
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


#: Bucket bounds (seconds) of the latency histograms: process (per message), commit, restore.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0001,
    0.0005,
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)


class Histogram:
    """Counts of observed durations (seconds) per bucket, with their sum.

    Prometheus' cumulative histogram is built from it at scrape time.

    >>> h = Histogram((0.1, 1.0))
    >>> h.observe(0.05); h.observe(0.5, count=3); h.observe(7.0)
    >>> h.cumulative(), h.count, round(h.sum, 2)
    ([(0.1, 1), (1.0, 4), (inf, 5)], 5, 8.55)
    """

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float, count: int = 1) -> None:
        """Record ``count`` observations of ``seconds`` each (a batch's mean per message)."""
        self.counts[bisect_left(self.bounds, seconds)] += count
        self.sum += seconds * count
        self.count += count

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= it)`` per bucket, ending with ``+Inf``."""
        running, out = 0, []
        for bound, n in zip((*self.bounds, math.inf), list(self.counts), strict=True):
            running += n
            out.append((bound, running))
        return out


class MetricsGroup:
    """The metrics of one owner (a store, a task, the container), by name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}
        self._histograms: dict[str, Histogram] = {}

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

    def histogram(self, name: str) -> Histogram:
        """The latency histogram called ``name`` (seconds), created empty on first use."""
        found = self._histograms.get(name)
        if found is None:
            found = self._histograms[name] = Histogram()
        return found

    def histograms(self) -> dict[str, Histogram]:
        """The group's histograms by name (a copy of the mapping), as of now."""
        return dict(self._histograms)

    def counter_names(self) -> frozenset[str]:
        """The names of the group's counters (monotonic), as of now."""
        return frozenset(list(self._counters))

    def gauge_names(self) -> frozenset[str]:
        """The names of the group's gauges, as of now."""
        return frozenset(list(self._gauges))

    def snapshot(self) -> dict[str, Any]:
        """Current values of every counter and gauge of the group.

        Histograms are read with :meth:`histograms`: the ``-ns`` counters carry their totals in
        snapshots.
        """
        # Copies first (list() of a dict's items is one step under the GIL): another thread may
        # add a metric to the group meanwhile (a task restoring in the background while the
        # container writes its metrics), and iterating the dict itself then fails.
        values: dict[str, Any] = {n: c.value for n, c in list(self._counters.items())}
        values.update({n: g.read() for n, g in list(self._gauges.items())})
        return values


class MetricsRegistry:
    """All metric groups of a container.

    Thread-safe to create groups; updates are not locked (single writer per group).
    """

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

    def remove(self, name: str) -> None:
        """Forget the group called ``name`` (its owner is gone); no error when unknown."""
        with self._lock:
            self._groups.pop(name, None)

    def groups(self) -> list[MetricsGroup]:
        """Every group of the registry, in creation order.

        A copy of the list: safe to iterate while the container creates more.
        """
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

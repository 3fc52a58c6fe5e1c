"""What a pipeline's user writes besides the stages: durations, window kinds, aggregations and serde names.

Plain frozen values: the compiler turns them into the operators of :mod:`samzapy.operators` (a
spec never holds state).

>>> minutes(10), hours(1) == 3_600_000
(600000, True)
>>> tumbling(hours=1)
Tumbling(size_ms=3600000)
>>> hopping(minutes=10, every=minutes(5)).every_ms
300000
>>> count().kind, sum("amount").kind
('count', 'sum')
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from samzapy.operators import aggregators as agg
from samzapy.operators.aggregators import Aggregator


def milliseconds(n: int) -> int:
    """``n`` ms (every duration in samzapy is an ``int`` of ms)."""
    return int(n)


def seconds(n: float) -> int:
    """``n`` seconds in ms."""
    return int(n * 1000)


def minutes(n: float) -> int:
    """``n`` minutes in ms."""
    return int(n * 60_000)


def hours(n: float) -> int:
    """``n`` hours in ms."""
    return int(n * 3_600_000)


def days(n: float) -> int:
    """``n`` days in ms."""
    return int(n * 86_400_000)


def _duration(ms: int, seconds_: float, minutes_: float, hours_: float, days_: float, what: str) -> int:
    total = int(ms) + seconds(seconds_) + minutes(minutes_) + hours(hours_) + days(days_)
    if total <= 0:
        msg = f"{what} needs a positive duration (ms=, seconds=, minutes=, hours= or days=), got {total} ms"
        raise ValueError(msg)
    return total


@dataclass(frozen=True)
class Tumbling:
    """Fixed windows of ``size_ms`` (:func:`tumbling`)."""

    size_ms: int


@dataclass(frozen=True)
class Hopping:
    """Windows of ``size_ms`` starting every ``every_ms`` (:func:`hopping`)."""

    size_ms: int
    every_ms: int


@dataclass(frozen=True)
class Session:
    """Sessions closed after ``gap_ms`` without a record of the key (:func:`session`)."""

    gap_ms: int


@dataclass(frozen=True)
class Sliding:
    """A window per distinct set of records at most ``difference_ms`` apart (:func:`sliding`)."""

    difference_ms: int


@dataclass(frozen=True)
class Counted:
    """Windows of ``size`` records per key, one every ``step`` records (:func:`count_window`)."""

    size: int
    step: int = 0


WindowSpec = Tumbling | Hopping | Session | Sliding | Counted


def tumbling(
    ms: int = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0
) -> Tumbling:
    """Tumbling (fixed, non-overlapping) event-time windows, e.g. ``tumbling(hours=1)``."""
    return Tumbling(_duration(ms, seconds, minutes, hours, days, "tumbling()"))


def hopping(
    ms: int = 0, *, every: int, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0
) -> Hopping:
    """Hopping windows of the given size starting every ``every`` ms.

    For example ``hopping(minutes=10, every=minutes(5))``.
    """
    return Hopping(_duration(ms, seconds, minutes, hours, days, "hopping()"), int(every))


def session(
    ms: int = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0
) -> Session:
    """Session windows with the given inactivity gap, e.g. ``session(minutes=30)``."""
    return Session(_duration(ms, seconds, minutes, hours, days, "session()"))


def sliding(
    ms: int = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0
) -> Sliding:
    """Sliding windows: records at most the given time apart share a window."""
    return Sliding(_duration(ms, seconds, minutes, hours, days, "sliding()"))


def count_window(size: int, step: int = 0) -> Counted:
    """Windows of ``size`` records per key (tumbling), or one starting every ``step`` records."""
    return Counted(size, step)


@dataclass(frozen=True)
class Aggregation:
    """What a window computes: ``kind`` (count, sum, min, max, reduce, aggregate) and the functions it needs.

    :meth:`aggregator` builds the operator's :class:`~samzapy.operators.aggregators.Aggregator`.
    """

    kind: str
    of: Callable[[Any], Any] | None = None
    fn: Callable[..., Any] | None = None
    initializer: Callable[[], Any] | None = None
    merge: Callable[[Any, Any], Any] | None = None
    functions: tuple[Any, ...] = field(default=(), compare=False)

    def aggregator(self) -> Aggregator:
        """The operator-level aggregator."""
        of = self.of or (lambda v: v)
        if self.kind == "count":
            return agg.count()
        if self.kind == "sum":
            return agg.sum_of(of)
        if self.kind == "min":
            return agg.min_of(of)
        if self.kind == "max":
            return agg.max_of(of)
        if self.kind == "reduce":
            assert self.fn is not None
            return agg.reduce(self.fn, of)
        assert self.fn is not None and self.initializer is not None
        add, init = self.fn, self.initializer
        merge = self.merge or _no_merge
        return Aggregator(create=lambda v: add(init(), v), add=add, merge=merge)


def _no_merge(_a: Any, _b: Any) -> Any:
    msg = "aggregate() over session windows needs merge=(a, b) -> aggregate: two sessions joined"
    raise ValueError(msg)


def _field(of: str | Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """A field name as a getter (``"amount"`` -> ``v["amount"]``)."""
    if isinstance(of, str):
        name = of
        return lambda v: v[name]
    return of


def count() -> Aggregation:
    """The number of records of the window."""
    return Aggregation("count")


def sum(of: str | Callable[[Any], Any] | None = None) -> Aggregation:  # noqa: A001 - the name users guess
    """The sum of the records (or of a field: ``sum("amount")``, or of ``of(value)``)."""
    return Aggregation("sum", of=_field(of), functions=(of,))


def min(of: str | Callable[[Any], Any] | None = None) -> Aggregation:  # noqa: A001
    """The smallest record (or field, or ``of(value)``)."""
    return Aggregation("min", of=_field(of), functions=(of,))


def max(of: str | Callable[[Any], Any] | None = None) -> Aggregation:  # noqa: A001
    """The largest record (or field, or ``of(value)``)."""
    return Aggregation("max", of=_field(of), functions=(of,))


def reduce(fn: Callable[[Any, Any], Any], of: str | Callable[[Any], Any] | None = None) -> Aggregation:
    """``fn(accumulated, value)`` folded over the records (associative, for sessions)."""
    return Aggregation("reduce", of=_field(of), fn=fn, functions=(fn, of))


def aggregate(
    initializer: Callable[[], Any],
    add: Callable[[Any, Any], Any],
    *,
    merge: Callable[[Any, Any], Any] | None = None,
) -> Aggregation:
    """``add(acc, value)`` from ``initializer()``; ``merge(a, b)`` for session windows.

    The aggregate must be JSON (it is stored as JSON).
    """
    return Aggregation(
        "aggregate", fn=add, initializer=initializer, merge=merge, functions=(initializer, add)
    )


@dataclass(frozen=True)
class SerdeName:
    """A serde by name.

    The built-in ones: ``json``, ``string``, ``long``, ``integer``, ``bytes``; or one registered
    with ``serializers.registry.<name>.class``. A stage also takes a serde class or object in
    its place (:data:`SerdeLike`).
    """

    name: str

    def __str__(self) -> str:
        return self.name


json = SerdeName("json")
string = SerdeName("string")
long = SerdeName("long")
integer = SerdeName("integer")
raw = SerdeName("bytes")


#: What a stage's ``key=`` or ``value=`` takes: a serde name, or a serde class or object (with
#: ``to_bytes`` and ``from_bytes``: :mod:`samzapy.pipeline.serde_objects` names it).
SerdeLike = SerdeName | builtins.str | Any


def serde_name(value: SerdeLike | None, what: str, where: Any = None) -> str | None:
    """The name of a serde given as :class:`SerdeName`, a string, a serde class or object, or ``None``.

    A serde class or object is registered under a name by
    :func:`samzapy.pipeline.serde_objects.serde_ref`.
    """
    if value is None or isinstance(value, SerdeName):
        return None if value is None else value.name
    if isinstance(value, builtins.str):
        return value
    from samzapy.pipeline.serde_objects import serde_ref

    try:
        return serde_ref(value, what)
    except TypeError as exc:
        if where is None:
            raise
        msg = f"{where}: {exc}"
        raise TypeError(msg) from None

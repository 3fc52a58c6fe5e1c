"""Aggregations for windows: count, sum, min, max and reduce, with a byte codec each.

An :class:`Aggregator` says how to start an aggregate from the first value, add a value,
merge two aggregates (for session windows that merge), turn an aggregate into the emitted
result, and encode/decode it for the store. Encoding is JSON via orjson with sorted keys, so
the same aggregate always has the same bytes.

>>> agg = count()
>>> agg.decode(agg.encode(agg.add(agg.create("x"), "y")))
2
>>> s = sum_of(lambda v: v["n"])
>>> s.merge(s.create({"n": 2}), s.create({"n": 3}))
5
>>> r = reduce(lambda a, b: a + b, value_of=str)
>>> r.result(r.add(r.create(1), 2))
'12'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson


def json_encode(value: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys).

    The result is a compact copy: orjson 3.13 returns its output in the buffer it wrote it
    into (4 KiB for a small value), and these bytes are kept (in object caches, coalesced
    changelogs): one window's count held 4 KiB until it was copied.

    >>> json_encode({"b": 1, "a": [1.5, None]})
    b'{"a":[1.5,null],"b":1}'
    """
    return b"%b" % orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class Aggregator:
    """How to aggregate the values of one window.

    Attributes:
        create: the aggregate of a window's first value.
        add: the aggregate after adding a value (must not mutate its argument in place if
            the store has an object cache above a serde: values are re-encoded on every add).
        merge: the aggregate of two windows merged (sessions); ``merge(a, b)`` where ``a``
            is the earlier window.
        result: the emitted value of an aggregate.
        encode: aggregate -> bytes for the store; must be deterministic.
        decode: bytes -> aggregate.
    """

    create: Callable[[Any], Any]
    add: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any]
    result: Callable[[Any], Any] = _identity
    encode: Callable[[Any], bytes] = json_encode
    decode: Callable[[bytes], Any] = orjson.loads


def count() -> Aggregator:
    """The number of values."""
    return Aggregator(create=lambda _v: 1, add=lambda a, _v: a + 1, merge=lambda a, b: a + b)


def sum_of(value_of: Callable[[Any], Any] = _identity) -> Aggregator:
    """The sum of ``value_of(value)`` over the values."""
    return Aggregator(create=value_of, add=lambda a, v: a + value_of(v), merge=lambda a, b: a + b)


def min_of(value_of: Callable[[Any], Any] = _identity) -> Aggregator:
    """The smallest ``value_of(value)``."""
    return Aggregator(create=value_of, add=lambda a, v: min(a, value_of(v)), merge=min)


def max_of(value_of: Callable[[Any], Any] = _identity) -> Aggregator:
    """The largest ``value_of(value)``."""
    return Aggregator(create=value_of, add=lambda a, v: max(a, value_of(v)), merge=max)


def reduce(
    fn: Callable[[Any, Any], Any],
    value_of: Callable[[Any], Any] = _identity,
    *,
    encode: Callable[[Any], bytes] = json_encode,
    decode: Callable[[bytes], Any] = orjson.loads,
) -> Aggregator:
    """``fn`` folded over ``value_of(value)`` in arrival order.

    Sessions merge with ``fn(a, b)``, so ``fn`` should be associative. Give
    ``encode``/``decode`` when the aggregate is not JSON.
    """
    return Aggregator(
        create=value_of,
        add=lambda a, v: fn(a, value_of(v)),
        merge=fn,
        encode=encode,
        decode=decode,
    )

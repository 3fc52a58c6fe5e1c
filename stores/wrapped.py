"""``WrappedStore``: the base of every store layer (Kafka Streams' ``WrappedStateStore``).

A layer holds the store below it in ``inner`` and passes every call it does not change
straight through, so a layer's class shows only what that layer does: the logged layer
overrides the writes, the cache reads and writes, the read-only view refuses the writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from samzapy.stores.base import KeyValueIterator, KeyValueStore

K = TypeVar("K")
V = TypeVar("V")

#: Overriding one method of a group without the others would let calls of the others bypass
#: the layer (a logged ``put`` with an unlogged ``put_all``): refused when the class is made.
_TOGETHER = (("put", "put_all"), ("get", "range", "all"))


class WrappedStore(KeyValueStore[K, V], Generic[K, V]):
    """A store layer over ``inner``.

    ``get``, ``put``, ``put_all``, ``range``, ``all``, ``flush`` and ``close`` pass through
    unless overridden.

    ``get_all``, ``delete`` and ``delete_all`` are not passed through: they are built on the
    layer's own ``get``/``put``/``put_all`` (as in :class:`KeyValueStore`), so a layer that
    changes writes changes deletes too. A layer that changes keys or values (the serde) must
    override every method; one that overrides ``put`` must override ``put_all`` too, and
    ``get`` goes with ``range`` and ``all`` (checked when the class is defined).

    :meth:`invalidate` is the restore's signal that the engine underneath was rewritten:
    layers that hold entries in memory (the object cache) forget them.
    """

    def __init__(self, inner: KeyValueStore[Any, Any]) -> None:
        self.inner = inner

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for group in _TOGETHER:
            overridden = [name for name in group if _overrides(cls, name)]
            if overridden and len(overridden) != len(group):
                missing = [name for name in group if name not in overridden]
                msg = (
                    f"store layer {cls.__name__} overrides {', '.join(overridden)} but not "
                    f"{', '.join(missing)}: calls of those would bypass the layer; override them too"
                )
                raise TypeError(msg)

    def get(self, key: K) -> V | None:
        """The inner store's value of ``key``."""
        return self.inner.get(key)

    def put(self, key: K, value: V | None) -> None:
        """Write to the inner store."""
        self.inner.put(key, value)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Write a batch to the inner store."""
        self.inner.put_all(entries)

    def range(self, from_key: K, to_key: K) -> KeyValueIterator[K, V]:
        """The inner store's entries with ``from_key <= key < to_key``."""
        return self.inner.range(from_key, to_key)

    def all(self) -> KeyValueIterator[K, V]:
        """Every entry of the inner store."""
        return self.inner.all()

    def flush(self) -> None:
        """Flush the inner store."""
        self.inner.flush()

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

    def invalidate(self) -> None:
        """Forget what this layer holds in memory, then tell the layers below.

        Forget what this layer holds in memory (the engine was rewritten underneath), then tell
        the layers below. The base holds nothing.
        """
        if isinstance(self.inner, WrappedStore):
            self.inner.invalidate()

    def layers(self) -> Iterator[KeyValueStore[Any, Any]]:
        """This layer and every store below it, outermost first (the engine last)."""
        store: KeyValueStore[Any, Any] = self
        while isinstance(store, WrappedStore):
            yield store
            store = store.inner
        yield store


def _overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` (or a class between it and WrappedStore) defines ``name`` itself."""
    for klass in cls.__mro__:
        if klass is WrappedStore:
            return False
        if name in vars(klass):
            return True
    return False

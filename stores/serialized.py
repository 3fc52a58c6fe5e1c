"""The serde layer: keys and values as objects above, as bytes below."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from samzapy.metrics import MetricsGroup
from samzapy.stores.base import Entry, KeyValueIterator, KeyValueStore
from samzapy.stores.wrapped import WrappedStore

K = TypeVar("K")
V = TypeVar("V")


class Serde(Protocol):
    """What a store needs of a serde (``samzapy.serdes``)."""

    def to_bytes(self, obj: Any) -> bytes:
        """Serialise ``obj``."""

    def from_bytes(self, data: bytes) -> Any:
        """Deserialise ``data``."""


class SerializedStore(WrappedStore[K, V], Generic[K, V]):
    """Serialises keys and values on the way down, deserialises on the way up (Samza's
    ``SerializedKeyValueStore``).

    Corner cases: a ``None`` serde passes raw bytes through; ``None`` values are never
    serialised (they mean delete); range bounds are serialised with the key serde, so the order
    is the byte order of the serialised keys. Counts ``bytes-written`` and ``bytes-read`` (key
    plus value bytes) in the store's metrics. Not thread-safe.
    """

    def __init__(
        self,
        inner: KeyValueStore[bytes, bytes],
        key_serde: Serde | None,
        msg_serde: Serde | None,
        metrics: MetricsGroup | None = None,
    ) -> None:
        super().__init__(inner)
        self.key_serde = key_serde
        self.msg_serde = msg_serde
        metrics = metrics or MetricsGroup("unnamed-store")
        self._bytes_written = metrics.counter("bytes-written")
        self._bytes_read = metrics.counter("bytes-read")
        self._kb = key_serde.to_bytes if key_serde is not None else _identity
        self._ko = key_serde.from_bytes if key_serde is not None else _identity
        self._vb = msg_serde.to_bytes if msg_serde is not None else _identity
        self._vo = msg_serde.from_bytes if msg_serde is not None else _identity

    def get(self, key: K) -> V | None:
        """Deserialised value of ``key``."""
        kb = self._kb(key)
        data = self.inner.get(kb)
        if data is None:
            return None
        self._bytes_read.value += len(kb) + len(data)
        return self._vo(data)

    def put(self, key: K, value: V | None) -> None:
        """Serialise and write one entry."""
        kb = self._kb(key)
        if value is None:
            self._bytes_written.value += len(kb)
            self.inner.put(kb, None)
            return
        vb = self._vb(value)
        self._bytes_written.value += len(kb) + len(vb)
        self.inner.put(kb, vb)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Serialise every entry, then write them in one batch."""
        kb, vb = self._kb, self._vb
        if kb is _identity and vb is _identity:  # a bytes store: nothing to encode
            encoded = list(entries)
        else:
            encoded = [(kb(k), None if v is None else vb(v)) for k, v in entries]
        self._bytes_written.value += sum(len(k) + (len(v) if v is not None else 0) for k, v in encoded)
        self.inner.put_all(encoded)

    def delete(self, key: K) -> None:
        """Delete ``key``."""
        self.inner.delete(self._kb(key))

    def range(self, from_key: K, to_key: K) -> KeyValueIterator[K, V]:
        """Deserialised entries with serialised ``from_key <= key < to_key``."""
        return self._decoded(self.inner.range(self._kb(from_key), self._kb(to_key)))

    def all(self) -> KeyValueIterator[K, V]:
        """Every deserialised entry, in serialised-key order."""
        return self._decoded(self.inner.all())

    def _decoded(self, raw: KeyValueIterator[bytes, bytes]) -> KeyValueIterator[K, V]:
        ko, vo, counter = self._ko, self._vo, self._bytes_read
        if ko is _identity and vo is _identity:
            return KeyValueIterator(_counted(raw, counter), raw.close)  # type: ignore[arg-type]

        def entries() -> Iterator[Entry[K, V]]:
            for kb, vb in raw:
                counter.value += len(kb) + len(vb)
                yield Entry(ko(kb), vo(vb))

        return KeyValueIterator(entries(), raw.close)


def _identity(data: Any) -> Any:
    return data


def _counted(raw: KeyValueIterator[bytes, bytes], counter: Any) -> Iterator[Entry[bytes, bytes]]:
    """The entries of a bytes store as they are, their bytes counted (one frame per entry
    fewer than decoding them with identity functions: range scans of the window store)."""
    for entry in raw:
        counter.value += len(entry[0]) + len(entry[1])
        yield entry

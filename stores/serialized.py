"""The serde layer: keys and values as objects above, as bytes below.

A value that does not fit a store's serde fails in the task's own ``put()``, naming the store,
the key, the serde's complaint and the config key that chose the serde
(:class:`SerdeCheckedStore` above the object cache, which would otherwise serialise it only at
the next flush, far from the call; :class:`SerializedStore` itself when there is no cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar, cast

from samzapy.errors import SerdeError, StoreError
from samzapy.metrics import Counter, MetricsGroup
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


class StoreSerdeError(StoreError, SerdeError):
    """A key or value does not fit its store's serde (raised in the task's own call)."""


def _short(obj: Any, limit: int = 60) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."


def serde_misfit(store: str, role: str, key: Any, value: Any, cause: Exception) -> StoreSerdeError:
    """The error for a ``role`` ("key" or "value") of ``store`` that its serde refused.

    >>> print(serde_misfit("counts", "value", "ann", b"1", SerdeError("LongSerde expects an int")))
    store 'counts' cannot take the value b'1' (bytes) of key 'ann': LongSerde expects an int. The store's \
value serde is set by stores.counts.msg.serde: put a value it takes, or set a serde that fits there
    """
    config_key = f"stores.{store}.{'key' if role == 'key' else 'msg'}.serde"
    what = f"the key {_short(key)}" if role == "key" else f"the value {_short(value)}"
    subject = type(key if role == "key" else value).__name__
    of_key = "" if role == "key" else f" of key {_short(key)}"
    text = (
        f"store '{store}' cannot take {what} ({subject}){of_key}: {cause}. The store's {role} serde "
        f"is set by {config_key}: put a {role} it takes, or set a serde that fits there"
    )
    return StoreSerdeError(text)


def serde_check(serde: Serde | None) -> Callable[[Any], object]:
    """A function that raises ``SerdeError`` for an object ``serde`` cannot write.

    The serde's own ``check`` when it has one (cheap: the built-in serdes check types), else
    ``to_bytes``; with no serde, only bytes pass.
    """
    if serde is None:
        return _check_bytes
    check: Callable[[Any], object] = getattr(serde, "check", None) or serde.to_bytes
    return check


def _check_bytes(obj: Any) -> None:
    if not isinstance(obj, bytes | bytearray | memoryview):
        msg = f"the store has no serde, so it takes bytes, not {type(obj).__name__}"
        raise SerdeError(msg)


class SerdeCheckedStore(WrappedStore[K, V], Generic[K, V]):
    """A layer that checks keys and values against the serdes at ``put``.

    Checks each key and value against the store's serdes at ``put``/``put_all`` (and so at
    ``delete``/``delete_all``, built on them), so that a misfit fails in the caller's own call
    (:func:`serde_misfit`), not at a later flush of the object cache below. Everything else
    passes straight through. Not thread-safe.
    """

    def __init__(
        self, inner: KeyValueStore[K, V], name: str, key_serde: Serde | None, msg_serde: Serde | None
    ) -> None:
        super().__init__(inner)
        self.name = name
        self._check_key = serde_check(key_serde)
        self._check_value = serde_check(msg_serde)
        # A bytes store (no serdes): ``bytes`` keys and values pass without a call each (the
        # window operators' every write); anything else takes the full check.
        self._bytes_only = key_serde is None and msg_serde is None

    def _check(self, key: K, value: V | None) -> None:
        try:
            self._check_key(key)
        except SerdeError as exc:
            raise serde_misfit(self.name, "key", key, value, exc) from None
        if value is not None:
            try:
                self._check_value(value)
            except SerdeError as exc:
                raise serde_misfit(self.name, "value", key, value, exc) from None

    def put(self, key: K, value: V | None) -> None:
        """Check, then write one entry (``None``: a delete, only the key is checked)."""
        if not (self._bytes_only and type(key) is bytes and (value is None or type(value) is bytes)):
            self._check(key, value)
        self.inner.put(key, value)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Check every entry, then write them all (nothing is written if one misfits)."""
        entries = list(entries)
        if self._bytes_only:
            for key, value in entries:
                if type(key) is not bytes or (value is not None and type(value) is not bytes):
                    self._check(key, value)
        else:
            for key, value in entries:
                self._check(key, value)
        self.inner.put_all(entries)

    def delete_scanned(self, keys: list[K], from_key: K, to_key: K) -> None:
        """Check every key and both bounds, then delete the range below (see the base class)."""
        if not (self._bytes_only and type(from_key) is bytes and type(to_key) is bytes):
            self._check(from_key, None)
            self._check(to_key, None)
        for key in keys:
            if not (self._bytes_only and type(key) is bytes):
                self._check(key, None)
        self.inner.delete_scanned(keys, from_key, to_key)


class SerializedStore(WrappedStore[K, V], Generic[K, V]):
    """Serialises keys and values on the way down, deserialises on the way up.

    Samza's ``SerializedKeyValueStore`` in Python.

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
        name: str | None = None,
    ) -> None:
        super().__init__(inner)
        self.name = name
        self.key_serde = key_serde
        self.msg_serde = msg_serde
        metrics = metrics or MetricsGroup("unnamed-store")
        self._bytes_written = metrics.counter("bytes-written")
        self._bytes_read = metrics.counter("bytes-read")
        # No serde: bytes pass as they are, bytearray and memoryview as bytes (RocksDB's raw
        # mode takes only bytes), anything else is a misfit.
        self._kb = key_serde.to_bytes if key_serde is not None else _as_bytes
        self._ko = key_serde.from_bytes if key_serde is not None else _identity
        self._vb = msg_serde.to_bytes if msg_serde is not None else _as_bytes
        self._vo = msg_serde.from_bytes if msg_serde is not None else _identity
        self._plain = key_serde is None and msg_serde is None  # a bytes store: nothing to convert

    def get(self, key: K) -> V | None:
        """Deserialised value of ``key``."""
        if self._plain and type(key) is bytes:  # no calls on the window operators' every read
            found = self.inner.get(key)
            if found is not None:
                self._bytes_read.value += len(key) + len(found)  # type: ignore[arg-type]
            return cast("V | None", found)
        kb = self._kb(key)
        data = self.inner.get(kb)
        if data is None:
            return None
        self._bytes_read.value += len(kb) + len(data)
        value: V = self._vo(data)
        return value

    def put(self, key: K, value: V | None) -> None:
        """Serialise and write one entry."""
        try:
            kb = self._kb(key)
            vb = None if value is None else self._vb(value)
        except (SerdeError, TypeError) as exc:
            raise self._misfit(key, value, exc) from None
        self._bytes_written.value += len(kb) + (0 if vb is None else len(vb))
        self.inner.put(kb, vb)

    def _misfit(self, key: K, value: V | None, exc: Exception) -> StoreError:
        """The :func:`serde_misfit` error of the key or value that failed."""
        try:
            self._kb(key)
        except Exception:  # noqa: BLE001 - the key was the one that failed
            return serde_misfit(self.name or "?", "key", key, value, exc)
        return serde_misfit(self.name or "?", "value", key, value, exc)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Serialise every entry, then write them in one batch."""
        written = 0
        if self._plain:  # a bytes store: nothing to encode when every key and value is bytes
            plain = cast("list[tuple[bytes, bytes | None]]", list(entries))
            for kbytes, vbytes in plain:  # a loop, not sum() over a generator: no frame per entry
                if vbytes is None:
                    if type(kbytes) is not bytes:
                        break
                    written += len(kbytes)
                elif type(kbytes) is not bytes or type(vbytes) is not bytes:
                    break
                else:
                    written += len(kbytes) + len(vbytes)
            else:
                self._bytes_written.value += written
                self.inner.put_all(plain)
                return
            entries, written = cast("list[tuple[K, V | None]]", plain), 0  # a bytearray or a misfit
        kb, vb = self._kb, self._vb
        encoded: list[tuple[bytes, bytes | None]] = []
        for k, v in entries:
            try:
                encoded.append((kb(k), None if v is None else vb(v)))
            except (SerdeError, TypeError) as exc:
                raise self._misfit(k, v, exc) from None
        for kbytes, vbytes in encoded:
            written += len(kbytes) if vbytes is None else len(kbytes) + len(vbytes)
        self._bytes_written.value += written
        self.inner.put_all(encoded)

    def delete(self, key: K) -> None:
        """Delete ``key``."""
        self.inner.delete(self._kb(key))

    def delete_scanned(self, keys: list[K], from_key: K, to_key: K) -> None:
        """Serialise the keys and the bounds, then delete the range below (see the base class)."""
        if self._plain and type(from_key) is bytes and type(to_key) is bytes:
            plain = cast("list[bytes]", keys)
            written = 0
            for kbytes in plain:  # a loop, not sum() over a generator: no frame per key
                if type(kbytes) is not bytes:
                    break
                written += len(kbytes)
            else:
                self._bytes_written.value += written
                self.inner.delete_scanned(plain, from_key, to_key)
                return
        kb = self._kb
        try:
            encoded = [kb(k) for k in keys]
            low, high = kb(from_key), kb(to_key)
        except (SerdeError, TypeError) as exc:
            raise self._misfit(from_key, None, exc) from None
        self._bytes_written.value += sum(len(k) for k in encoded)
        self.inner.delete_scanned(encoded, low, high)

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


def _as_bytes(data: Any) -> bytes:
    """``data`` for a store without a serde: bytes, or a ``SerdeError`` naming what it was."""
    if type(data) is bytes:
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    msg = f"the store has no serde, so it takes bytes, not {type(data).__name__}"
    raise SerdeError(msg)


def _counted(raw: KeyValueIterator[bytes, bytes], counter: Counter) -> Iterator[Entry[bytes, bytes]]:
    """The entries of a bytes store as they are, their bytes counted.

    One frame per entry fewer than decoding them with identity functions: range scans of the
    window store.
    """
    for entry in raw.entries:  # not through ``raw.__next__``: the caller's iterator closes ``raw``
        counter.value += len(entry[0]) + len(entry[1])
        yield entry

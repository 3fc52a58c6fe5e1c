"""How a store's entries read as rows, and which key (hence which task) each entry belongs to.

A store holds bytes. A *layout* turns one stored entry into the readable columns of
:func:`samzapy.spark.state_read.read_state`, and names its *partition key*: the bytes the job's
partitioner hashes to find the task that owns the entry (used by
:mod:`samzapy.spark.reshard`).

- :class:`KeyValueLayout` (the default): the key and the value decoded with the store's
  serdes. The partition key is the key re-encoded with the job's input key serde, or what the
  hook ``stores.<store>.partition.key`` (``module:function``, called with the decoded key,
  returning the partition key's bytes) says.
- :class:`WindowLayout`: the stores of :class:`~samzapy.operators.windows.WindowedAggregation`
  (:mod:`samzapy.operators.window_layout`): fixed windows become ``kind='window'`` rows with
  the user key, window start and end and the aggregate; session windows ``kind='session'``;
  the task's own bookkeeping (watermarks, dedup sequences, counters) ``kind='internal'`` rows
  with the stored key escaped as text. Internal entries belong to a task, not to a key: they
  have no partition key.

- :class:`JoinBufferLayout`, :class:`JoinExpiryLayout`: the stores of
  :class:`~samzapy.operators.stream_join.StreamStreamJoin` (buffered records with their event
  time, record id and matched flag; the expiry index); :class:`TaskStateLayout`: a store of a
  task's own state only (no partition key).

A task class names the layouts of its stores with a classmethod
``state_layouts(config) -> {store: layout}`` (the page-view counter does); every other store
is a :class:`KeyValueLayout`.

Every decoded row is a dict of :data:`ROW_FIELDS`; the JSON texts become typed columns on the
driver (:mod:`samzapy.spark.state_read`).

>>> from samzapy.operators.window_layout import fixed_key
>>> layout = WindowLayout(b"cw")
>>> row = layout.decode(fixed_key(b"cw\\x00wt", 7_200_000, b"ann", 3_600_000), b"3")
>>> row["kind"], row["key_json"], row["window_start"], row["window_end"], row["value_json"]
('window', '"ann"', 3600000, 7200000, '3')
>>> layout.partition_key(fixed_key(b"cw\\x00wt", 7_200_000, b"ann", 3_600_000), b"3")
b'ann'
>>> layout.decode(b"\\x00late", b"\\x00\\x00")["kind"], layout.partition_key(b"\\x00late", b"")
('internal', None)
"""

from __future__ import annotations

import base64
import importlib
from dataclasses import dataclass
from typing import Any

import orjson

from samzapy.config import Config, JobConfig, StoreConfig
from samzapy.errors import SerdeError
from samzapy.operators.keys import decode_ms, unescape
from samzapy.operators.window_layout import FIXED_TAG, SESSION_INDEX_TAG, SESSION_TAG, decode_fixed_key
from samzapy.serdes import Serde, SerdeResolver
from samzapy.spark import SparkJobError

#: What a layout's :meth:`decode` returns, in this order (JSON texts, later typed columns).
ROW_FIELDS = ("kind", "key_json", "window_start", "window_end", "value_json")


def to_json(obj: Any) -> str:
    """JSON text of a decoded object; bytes become ``{"$base64": ...}``.

    >>> to_json({"a": b"\\x01"}), to_json("x")
    ('{"a":{"$base64":"AQ=="}}', '"x"')
    """
    return orjson.dumps(obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        return {"$base64": base64.b64encode(bytes(obj)).decode()}
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    msg = f"cannot show {type(obj).__name__} as JSON"
    raise TypeError(msg)


def escaped_text(data: bytes) -> str:
    r"""Stored bytes as readable text: printable ASCII as it is, the rest as ``\xNN``.

    >>> escaped_text(b"et:0\x00wm")
    'et:0\\x00wm'
    """
    return repr(bytes(data))[2:-1]


@dataclass(frozen=True)
class KeyValueLayout:
    """Entries are (key, value) of the store's serdes (module doc)."""

    key_serde: Serde | None = None
    msg_serde: Serde | None = None
    input_key_serde: Serde | None = None
    partition_hook: str | None = None

    def decode(self, key: bytes, value: bytes) -> dict[str, Any]:
        """The row of one entry (:data:`ROW_FIELDS`)."""
        return {
            "kind": "entry",
            "key_json": to_json(_decode(self.key_serde, key)),
            "window_start": None,
            "window_end": None,
            "value_json": to_json(_decode(self.msg_serde, value)),
        }

    def encode(self, key: Any, value: Any) -> tuple[bytes, bytes]:
        """The stored bytes of a (key, value) pair of objects (bytes pass through without a serde)."""
        return _encode(self.key_serde, key, "key"), _encode(self.msg_serde, value, "value")

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The bytes the job's partitioner hashes for this entry."""
        if self.partition_hook is not None:
            return _call_hook(self.partition_hook, _decode(self.key_serde, key))
        if self.input_key_serde is None:
            return key
        obj = _decode(self.key_serde, key)
        return _encode(self.input_key_serde, obj, "partition key")


@dataclass(frozen=True)
class WindowLayout:
    """A :class:`~samzapy.operators.windows.WindowedAggregation` store with ``namespace``
    (module doc); aggregates are the JSON the default aggregators encode."""

    namespace: bytes

    def decode(self, key: bytes, value: bytes) -> dict[str, Any]:
        """The row of one entry (:data:`ROW_FIELDS`)."""
        fixed, session = self.namespace + FIXED_TAG, self.namespace + SESSION_TAG
        if key.startswith(fixed):
            user, start, end = decode_fixed_key(key, len(fixed))
            return _window_row("window", user, start, end, value)
        if key.startswith(session):
            user, offset = unescape(key, len(session))
            return _window_row("session", user, decode_ms(key, offset), decode_ms(value), value[8:])
        return {
            "kind": "internal",
            "key_json": to_json(escaped_text(key)),
            "window_start": None,
            "window_end": None,
            "value_json": to_json(escaped_text(value)),
        }

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The window's key; ``None`` for the task's own entries and the session end index."""
        fixed, session = self.namespace + FIXED_TAG, self.namespace + SESSION_TAG
        if key.startswith(fixed):
            return decode_fixed_key(key, len(fixed))[0]
        if key.startswith(session):
            return unescape(key, len(session))[0]
        if key.startswith(self.namespace + SESSION_INDEX_TAG):
            return unescape(key, len(self.namespace + SESSION_INDEX_TAG) + 8)[0]
        return None


@dataclass(frozen=True)
class JoinBufferLayout:
    """A side store of :class:`~samzapy.operators.stream_join.StreamStreamJoin`
    (``escape(key) + time + record_id -> flag + JSON``): ``kind='buffered'`` rows whose value
    columns are ``event_time``, ``record_id``, ``matched`` and ``value``."""

    def decode(self, key: bytes, value: bytes) -> dict[str, Any]:
        """The row of one buffered record."""
        user, offset = unescape(key)
        body = {
            "event_time": decode_ms(key, offset),
            "record_id": key[offset + 8 :].decode(errors="replace"),
            "matched": value[:1] == b"\x01",
            "value": _loads(value[1:]),
        }
        return _row("buffered", _text(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key."""
        return unescape(key)[0]


@dataclass(frozen=True)
class JoinExpiryLayout:
    """The expiry index of a stream-stream join (``close time + side + buffer key -> b""``):
    ``kind='expiry'`` rows with ``close_at``, ``side`` (``l``/``r``), ``event_time`` and
    ``record_id``."""

    def decode(self, key: bytes, value: bytes) -> dict[str, Any]:
        """The row of one index entry."""
        user, offset = unescape(key, 9)
        body = {
            "close_at": decode_ms(key),
            "side": key[8:9].decode(errors="replace"),
            "event_time": decode_ms(key, offset),
            "record_id": key[offset + 8 :].decode(errors="replace"),
        }
        return _row("expiry", _text(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key of the indexed record."""
        return unescape(key, 9)[0]


@dataclass(frozen=True)
class TaskStateLayout:
    """A store of a task's own state (watermarks, registries of ids): every entry is
    ``kind='internal'`` with its key and value as escaped text, and belongs to no key (a
    reshard refuses it rather than guess)."""

    def decode(self, key: bytes, value: bytes) -> dict[str, Any]:
        """The row of one entry."""
        return _row("internal", escaped_text(key), escaped_text(value))

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """None: the entry is the task's, not a key's."""
        return None


def _row(kind: str, key: Any, value: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "key_json": to_json(key),
        "window_start": None,
        "window_end": None,
        "value_json": to_json(value),
    }


def _text(data: bytes) -> Any:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return bytes(data)


def _window_row(kind: str, user: bytes, start: int, end: int, aggregate: bytes) -> dict[str, Any]:
    try:
        key: Any = user.decode()
    except UnicodeDecodeError:
        key = user
    try:
        value = orjson.loads(aggregate)
    except orjson.JSONDecodeError:
        value = aggregate
    return {
        "kind": kind,
        "key_json": to_json(key),
        "window_start": start,
        "window_end": end,
        "value_json": to_json(value),
    }


def _decode(serde: Serde | None, data: bytes) -> Any:
    if serde is None:
        return bytes(data)
    try:
        return serde.from_bytes(data)
    except SerdeError:
        return bytes(data)  # shown as {"$base64": ...}: the raw columns hold it exactly


def _encode(serde: Serde | None, obj: Any, what: str) -> bytes:
    if serde is None:
        if isinstance(obj, bytes | bytearray):
            return bytes(obj)
        if isinstance(obj, str):
            return obj.encode()
        msg = f"{what} {obj!r} has no serde to write it with: give bytes or str, or configure a serde"
        raise SparkJobError(msg)
    try:
        return serde.to_bytes(obj)
    except SerdeError as exc:
        raise SparkJobError(f"{what} {obj!r}: {exc}") from exc


def _call_hook(spec: str, key: Any) -> bytes:
    module, _, name = spec.partition(":")
    function = getattr(importlib.import_module(module), name)
    result = function(key)
    return result.encode() if isinstance(result, str) else bytes(result)


Layout = KeyValueLayout | WindowLayout | JoinBufferLayout | JoinExpiryLayout | TaskStateLayout


def layout_for(config: Config, job: JobConfig, store: StoreConfig) -> Layout:
    """The layout of ``store``: the task class's ``state_layouts`` entry, else key-value."""
    from samzapy.config import resolve_task_class

    task_class = resolve_task_class(job.task_class, config.location("task.class"))
    declared = getattr(task_class, "state_layouts", None)
    if declared is not None:
        layout = declared(config).get(store.name)
        if layout is not None:
            return layout
    serdes = SerdeResolver(job)
    key_serde, msg_serde = serdes.for_store(store)
    hook = config.get(f"stores.{store.name}.partition.key") or None
    return KeyValueLayout(key_serde, msg_serde, _input_key_serde(job, store, serdes), hook)


def _input_key_serde(job: JobConfig, store: StoreConfig, serdes: SerdeResolver) -> Serde | None:
    """The serde input keys are written with; ``None`` when the store's key bytes are those."""
    if not job.inputs or store.key_serde is None:
        return None
    name = job.stream(job.inputs[0]).key_serde
    return None if name == store.key_serde else serdes.get(name)

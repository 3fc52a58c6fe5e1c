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
  early-firing markers ``kind='early_marker'`` (the marked window, no aggregate); the task's
  own bookkeeping (watermarks, dedup sequences, counters) ``kind='internal'`` rows with the
  stored key and value escaped as text.
- :class:`JoinBufferLayout`, :class:`JoinExpiryLayout`: the stores of
  :class:`~samzapy.operators.stream_join.StreamStreamJoin` (buffered records with their event
  time, record id and matched flag; the expiry index); :class:`TaskStateLayout`: a store of a
  task's own state only (no partition key).
- The dedup, foreign-key join, versioned-table and event-time join stores:
  :mod:`samzapy.spark.operator_layouts`.

A task class names the layouts of its stores with a classmethod
``state_layouts(config) -> {store: layout}`` (the page-view counter does; the operators'
modules have helpers that build them); a store with ``stores.<store>.versioned.history.ms``
is a :class:`~samzapy.spark.operator_layouts.VersionedLayout`, every other store a
:class:`KeyValueLayout`.

An entry without a partition key is the task's own (a watermark, a registry of ids): a layout
names how a reshard combines such entries of the old tasks into the new ones
(:meth:`Layout.merge_rule`, from :class:`TaskEntries`; :mod:`samzapy.spark.reshard_own` says
what each rule does and why). An entry with neither stops a reshard.

Every decoded row is a dict of :data:`ROW_FIELDS`; the JSON texts become typed columns on the
driver (:mod:`samzapy.spark.state_read`).

>>> from samzapy.operators.window_layout import fixed_key
>>> layout = WindowLayout(b"cw", own=(TaskEntries(b"\\x00late", SUM),))
>>> row = layout.decode(fixed_key(b"cw\\x00wt", 7_200_000, b"ann", 3_600_000), b"3")
>>> row["kind"], row["key_json"], row["window_start"], row["window_end"], row["value_json"]
('window', '"ann"', 3600000, 7200000, '3')
>>> layout.partition_key(fixed_key(b"cw\\x00wt", 7_200_000, b"ann", 3_600_000), b"3")
b'ann'
>>> layout.decode(b"\\x00late", b"\\x00\\x00")["kind"], layout.partition_key(b"\\x00late", b"")
('internal', None)
>>> layout.merge_rule(b"\\x00late", b""), layout.merge_rule(b"\\x00other", b"") is None
('sum', True)
"""

from __future__ import annotations

import base64
import importlib
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from samzapy.config import Config, JobConfig, StoreConfig
from samzapy.errors import SerdeError
from samzapy.operators.emission import DIRTY_TAG
from samzapy.operators.keys import decode_ms, unescape
from samzapy.operators.window_layout import FIXED_TAG, SESSION_INDEX_TAG, SESSION_TAG, decode_fixed_key
from samzapy.serdes import Serde, SerdeResolver
from samzapy.spark import SparkJobError

#: What a layout's :meth:`decode` returns, in this order (JSON texts, later typed columns).
ROW_FIELDS = ("kind", "key_json", "window_start", "window_end", "value_json")

#: How a reshard combines one task-own entry of the old tasks into a new task
#: (:mod:`samzapy.spark.reshard_own`): the smallest value, the largest, the sum of 8-byte
#: counts, a copy in every new task that may receive the old task's keys, or a flag kept only
#: where every such old task had it.
MIN, MAX, SUM, COPY, ALL = "min", "max", "sum", "copy", "all"
MERGE_RULES = (MIN, MAX, SUM, COPY, ALL)


class Layout(Protocol):
    """What every layout does (the classes below and :mod:`samzapy.spark.operator_layouts`)."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry (:data:`ROW_FIELDS`); ``following`` is the store key after it
        in the store's order (``None``: it is the last), for layouts whose rows depend on it."""
        ...

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The bytes the job's partitioner hashes for this entry; ``None``: the task's own."""
        ...

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """For an entry without a partition key, how a reshard combines it (one of
        :data:`MERGE_RULES`); ``None``: it cannot be combined (the reshard refuses)."""
        ...


@dataclass(frozen=True)
class TaskEntries:
    """Task-own entries of a store: the keys that start with ``prefix`` and end with
    ``suffix``, combined by a reshard with ``rule`` (one of :data:`MERGE_RULES`).

    >>> TaskEntries(b"et", MIN, b"\\x00wm").matches(b"et:clicks\\x00wm")
    True
    """

    prefix: bytes
    rule: str
    suffix: bytes = b""

    def matches(self, key: bytes) -> bool:
        """Whether ``key`` is one of these entries."""
        fits = len(key) >= len(self.prefix) + len(self.suffix)
        return fits and key.startswith(self.prefix) and key.endswith(self.suffix)


def rule_of(entries: tuple[TaskEntries, ...], key: bytes) -> str | None:
    """The rule of the first of ``entries`` that ``key`` matches (``None``: none does)."""
    for entry in entries:
        if entry.matches(key):
            return entry.rule
    return None


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

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry (:data:`ROW_FIELDS`)."""
        return {
            "kind": "entry",
            "key_json": to_json(decode_with(self.key_serde, key)),
            "window_start": None,
            "window_end": None,
            "value_json": to_json(decode_with(self.msg_serde, value)),
        }

    def encode(self, key: Any, value: Any) -> tuple[bytes, bytes]:
        """The stored bytes of a (key, value) pair of objects (bytes pass through without a serde)."""
        return _encode(self.key_serde, key, "key"), _encode(self.msg_serde, value, "value")

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The bytes the job's partitioner hashes for this entry."""
        if self.partition_hook is not None:
            return _call_hook(self.partition_hook, decode_with(self.key_serde, key))
        if self.input_key_serde is None:
            return key
        obj = decode_with(self.key_serde, key)
        return _encode(self.input_key_serde, obj, "partition key")

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: every entry has a partition key."""
        return None


@dataclass(frozen=True)
class WindowLayout:
    """A :class:`~samzapy.operators.windows.WindowedAggregation` store with ``namespace``
    (module doc); aggregates are the JSON the default aggregators encode. ``own`` names the
    task's own entries that share the store (watermarks, sequences, counters:
    :mod:`samzapy.spark.operator_layouts` has the operators' sets) and how a reshard combines
    them."""

    namespace: bytes
    own: tuple[TaskEntries, ...] = ()

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry (:data:`ROW_FIELDS`)."""
        fixed, session = self.namespace + FIXED_TAG, self.namespace + SESSION_TAG
        if key.startswith(fixed):
            user, start, end = decode_fixed_key(key, len(fixed))
            return _window_row("window", user, start, end, value)
        if key.startswith(session):
            user, offset = unescape(key, len(session))
            return _window_row("session", user, decode_ms(key, offset), decode_ms(value), value[8:])
        marked = self._marked(key)
        if marked is not None and marked.startswith(fixed):
            user, start, end = decode_fixed_key(marked, len(fixed))
            return _window_row("early_marker", user, start, end, b"null")
        if marked is not None:  # a session's marker: its end is in the session's entry
            user, offset = unescape(marked, len(session))
            return _window_row("early_marker", user, decode_ms(marked, offset), None, b"null")
        return {
            "kind": "internal",
            "key_json": to_json(escaped_text(key)),
            "window_start": None,
            "window_end": None,
            "value_json": to_json(escaped_text(value)),
        }

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The window's key; ``None`` for the task's own entries."""
        fixed, session = self.namespace + FIXED_TAG, self.namespace + SESSION_TAG
        if key.startswith(fixed):
            return decode_fixed_key(key, len(fixed))[0]
        if key.startswith(session):
            return unescape(key, len(session))[0]
        if key.startswith(self.namespace + SESSION_INDEX_TAG):
            return unescape(key, len(self.namespace + SESSION_INDEX_TAG) + 8)[0]
        marked = self._marked(key)
        return None if marked is None else self.partition_key(marked, b"")

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """How a reshard combines a task-own entry (``own``)."""
        return rule_of(self.own, key)

    def _marked(self, key: bytes) -> bytes | None:
        """The window store key an early-firing marker names (``None``: not a marker)."""
        marker = self.namespace + DIRTY_TAG
        if not key.startswith(marker):
            return None
        window = key[len(marker) :]
        tags = (self.namespace + FIXED_TAG, self.namespace + SESSION_TAG)
        return window if window.startswith(tags) else None


@dataclass(frozen=True)
class JoinBufferLayout:
    """A side store of :class:`~samzapy.operators.stream_join.StreamStreamJoin`
    (``escape(key) + time + record_id -> flag + JSON``): ``kind='buffered'`` rows whose value
    columns are ``event_time``, ``record_id``, ``matched`` and ``value``."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one buffered record."""
        user, offset = unescape(key)
        body = {
            "event_time": decode_ms(key, offset),
            "record_id": key[offset + 8 :].decode(errors="replace"),
            "matched": value[:1] == b"\x01",
            "value": json_or_bytes(value[1:]),
        }
        return record_row("buffered", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key."""
        return unescape(key)[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: every entry has a partition key."""
        return None


@dataclass(frozen=True)
class JoinExpiryLayout:
    """The expiry index of a stream-stream join (``close time + side + buffer key -> b""``):
    ``kind='expiry'`` rows with ``close_at``, ``side`` (``l``/``r``), ``event_time`` and
    ``record_id``."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one index entry."""
        user, offset = unescape(key, 9)
        body = {
            "close_at": decode_ms(key),
            "side": key[8:9].decode(errors="replace"),
            "event_time": decode_ms(key, offset),
            "record_id": key[offset + 8 :].decode(errors="replace"),
        }
        return record_row("expiry", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The join key of the indexed record."""
        return unescape(key, 9)[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: every entry has a partition key."""
        return None


@dataclass(frozen=True)
class TaskStateLayout:
    """A store of a task's own state (watermarks, registries of ids): every entry is
    ``kind='internal'`` with its key and value as escaped text, and belongs to no key. ``own``
    says how a reshard combines the entries; an entry it does not name makes a reshard
    refuse rather than guess."""

    own: tuple[TaskEntries, ...] = ()

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry."""
        return record_row("internal", escaped_text(key), escaped_text(value))

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """None: the entry is the task's, not a key's."""
        return None

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """How a reshard combines the entry (``own``)."""
        return rule_of(self.own, key)


def record_row(kind: str, key: Any, body: Any) -> dict[str, Any]:
    """The row (:data:`ROW_FIELDS`) of an entry of ``kind`` shown as ``key`` and ``body``
    (a dict: its fields become columns)."""
    return {
        "kind": kind,
        "key_json": to_json(key),
        "window_start": None,
        "window_end": None,
        "value_json": to_json(body),
    }


def readable(data: bytes) -> Any:
    """Stored key bytes as text when they are UTF-8, else the bytes (shown as base64)."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def json_or_bytes(data: bytes) -> Any:
    """The JSON value in ``data``, else the bytes (shown as base64)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return bytes(data)


def _window_row(kind: str, user: bytes, start: int, end: int | None, aggregate: bytes) -> dict[str, Any]:
    return {
        "kind": kind,
        "key_json": to_json(readable(user)),
        "window_start": start,
        "window_end": end,
        "value_json": to_json(json_or_bytes(aggregate)),
    }


def decode_with(serde: Serde | None, data: bytes) -> Any:
    """``data`` decoded with ``serde``; the bytes themselves without one or when it fails."""
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


def layout_for(config: Config, job: JobConfig, store: StoreConfig) -> Layout:
    """The layout of ``store``: the task class's ``state_layouts`` entry, else a versioned
    table's (namespace ``b""``, as ``context.get_versioned_store`` has by default), else
    key-value."""
    from samzapy.config import resolve_task_class

    task_class = resolve_task_class(job.task_class, config.location("task.class"))
    declared = getattr(task_class, "state_layouts", None)
    if declared is not None:
        layout: Layout | None = declared(config).get(store.name)
        if layout is not None:
            return layout
    if store.versioned_history_ms is not None:
        from samzapy.spark.operator_layouts import VersionedLayout

        return VersionedLayout()
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

r"""How a store's entries read as rows, and which key (hence which task) each entry belongs to.

A store holds bytes. A *layout* turns one stored entry into the readable columns of
:func:`samzapy.spark.state_data.read_state`, and names its *partition key*: the bytes the job's
partitioner hashes to find the task that owns the entry (used by
:func:`samzapy.spark.state_data.reshard`). Each operator declares the layout of its store next to
its encoding, in this package, and reads its byte tags from there (one definition):

- :class:`KeyValueLayout` (the default, here): the key and the value decoded with the store's
  serdes. The partition key is the key re-encoded with the job's input key serde, or what the
  hook ``stores.<store>.partition.key`` (``module:function``, called with the decoded key,
  returning the partition key's bytes) says.
- :class:`TaskStateLayout` (here): a store of a task's own state only (no partition key);
  :class:`SharedLayout`: several operators in one store, each under its namespace.
- :class:`~samzapy.operators.window_layout.WindowLayout` (windowed aggregations),
  :mod:`samzapy.operators.stream_join_layout` (stream-stream joins),
  :class:`~samzapy.operators.dedup_layout.DedupLayout`,
  :class:`~samzapy.operators.fk_layout.ForeignKeySubscriptionLayout`,
  :class:`~samzapy.operators.versioned_layout.VersionedLayout` and
  :class:`~samzapy.operators.temporal_layout.TemporalBufferLayout`.

A task class names the layouts of its stores with a classmethod
``state_layouts(config) -> {store: layout}`` (the operators' modules have helpers that build
them); :func:`layout_for` finds a store's layout: that entry, else a versioned table's for a
store with ``stores.<store>.versioned.history.ms``, else :class:`KeyValueLayout`.

An entry without a partition key is the task's own (a watermark, a registry of ids): a layout
names how a reshard combines such entries of the old tasks into the new ones
(:meth:`Layout.merge_rule`, from :class:`TaskEntries`, which the operators' ``*_entries``
helpers build; :mod:`samzapy.spark.state_data.reshard_own` says what each rule does and why). An
entry with neither stops a reshard.

Every decoded row is a dict of :data:`ROW_FIELDS`; keys and values are shown with the one
people-facing codec (:mod:`samzapy.store_codec`), and the JSON texts become typed columns on
the Spark driver.

>>> layout = TaskStateLayout(own=(TaskEntries(b"\x00late", SUM),))
>>> layout.decode(b"\x00late", b"\x00\x00")["kind"], layout.partition_key(b"\x00late", b"")
('internal', None)
>>> layout.merge_rule(b"\x00late", b""), layout.merge_rule(b"\x00other", b"") is None
('sum', True)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from samzapy.config import Config, JobConfig, StoreConfig
from samzapy.errors import SerdeError
from samzapy.serdes import Serde, SerdeResolver
from samzapy.store_codec import decode, escaped_text, to_json

#: What a layout's :meth:`decode` returns, in this order (JSON texts, later typed columns).
ROW_FIELDS = ("kind", "key_json", "window_start", "window_end", "value_json")

#: How a reshard combines one task-own entry of the old tasks into a new task
#: (:mod:`samzapy.spark.state_data.reshard_own`): the smallest value, the largest, the sum of
#: 8-byte counts, a copy in every new task that may receive the old task's keys, or a flag kept
#: only where every such old task had it.
MIN, MAX, SUM, COPY, ALL = "min", "max", "sum", "copy", "all"
MERGE_RULES = (MIN, MAX, SUM, COPY, ALL)


class Layout(Protocol):
    """What every layout does (the classes here and the operators' layouts)."""

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry (:data:`ROW_FIELDS`).

        ``following`` is the store key after it in the store's order (``None``: it is the last),
        for layouts whose rows depend on it.
        """
        ...

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The bytes the job's partitioner hashes for this entry; ``None``: the task's own."""
        ...

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """For an entry without a partition key, how a reshard combines it (one of :data:`MERGE_RULES`).

        ``None``: it cannot be combined (the reshard refuses).
        """
        ...


class PartLayout(Layout, Protocol):
    """A layout of the entries under one namespace, which :class:`SharedLayout` combines."""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is one of this layout's entries."""
        ...


@dataclass(frozen=True)
class TaskEntries:
    r"""Task-own entries of a store.

    The keys that start with ``prefix`` and end with ``suffix``, combined by a reshard with
    ``rule`` (one of :data:`MERGE_RULES`).

    >>> TaskEntries(b"et", MIN, b"\x00wm").matches(b"et:clicks\x00wm")
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


def record_row(kind: str, key: Any, body: Any) -> dict[str, Any]:
    """The row of an entry of ``kind`` shown as ``key`` and ``body``.

    The row (:data:`ROW_FIELDS`) of an entry of ``kind`` shown as ``key`` and ``body`` (a dict:
    its fields become columns).
    """
    return {
        "kind": kind,
        "key_json": to_json(key),
        "window_start": None,
        "window_end": None,
        "value_json": to_json(body),
    }


def unknown_row(key: bytes, value: bytes) -> dict[str, Any]:
    """The row of an entry no layout knows: its key and value as escaped text."""
    return record_row("internal", escaped_text(key), {"stored": escaped_text(value)})


def decode_with(serde: Serde | None, data: bytes) -> Any:
    """``data`` decoded with ``serde``; the bytes themselves without one or when it fails.

    Shown as ``{"$base64": ...}``: the raw columns hold them exactly.
    """
    return decode(serde, data, say_why=False)


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
        """The stored bytes of a (key, value) pair of objects (bytes pass through without a serde).

        Raises:
            SerdeError: the key or the value does not fit its serde.
        """
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
class TaskStateLayout:
    """A store of a task's own state (watermarks, registries of ids).

    Every entry is ``kind='internal'`` with its key and value as escaped text, and belongs to no
    key. ``own`` says how a reshard combines the entries; an entry it does not name makes a
    reshard refuse rather than guess.
    """

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


@dataclass(frozen=True)
class SharedLayout:
    """Several operators in one store.

    Each entry is read by the first of ``parts`` that claims it (an entry none claims:
    ``kind='internal'``, and a reshard refuses it).
    """

    parts: tuple[PartLayout, ...]

    def _part(self, key: bytes) -> PartLayout | None:
        return next((part for part in self.parts if part.claims(key)), None)

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one entry."""
        part = self._part(key)
        return unknown_row(key, value) if part is None else part.decode(key, value, following)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The claiming part's partition key."""
        part = self._part(key)
        return None if part is None else part.partition_key(key, value)

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """The claiming part's rule."""
        part = self._part(key)
        return None if part is None else part.merge_rule(key, value)

    @property
    def reshard_refusal(self) -> str | None:
        """The first part's refusal (:class:`~samzapy.operators.fk_layout.ForeignKeySubscriptionLayout`)."""
        return next((r for p in self.parts if (r := getattr(p, "reshard_refusal", None))), None)


def _encode(serde: Serde | None, obj: Any, what: str) -> bytes:
    if serde is None:
        if isinstance(obj, bytes | bytearray):
            return bytes(obj)
        if isinstance(obj, str):
            return obj.encode()
        msg = f"{what} {obj!r} has no serde to write it with: give bytes or str, or configure a serde"
        raise SerdeError(msg)
    try:
        return serde.to_bytes(obj)
    except SerdeError as exc:
        msg = f"{what} {obj!r}: {exc}"
        raise SerdeError(msg) from exc


def _call_hook(spec: str, key: Any) -> bytes:
    module, _, name = spec.partition(":")
    function = getattr(importlib.import_module(module), name)
    result = function(key)
    return result.encode() if isinstance(result, str) else bytes(result)


def layout_for(config: Config, job: JobConfig, store: StoreConfig) -> Layout:
    """The layout of ``store``.

    The task class's ``state_layouts`` entry, else a versioned table's (namespace ``b""``, as
    ``context.get_versioned_store`` has by default), else key-value.
    """
    from samzapy.config import resolve_task_class
    from samzapy.operators.versioned_layout import VersionedLayout  # it imports this module

    task_class = resolve_task_class(job.task_class, config.location("task.class"))
    declared = getattr(task_class, "state_layouts", None)
    if declared is not None:
        layout: Layout | None = declared(config).get(store.name)
        if layout is not None:
            return layout
    if store.versioned_history_ms is not None:
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

"""Event time across inputs and stages: control records, lineage headers, per-source watermarks.

Event-time jobs (the patterns in ``samzapy.jobs`` and yours) agree on three conventions, so
that event-time results do not depend on how the container happens to interleave partitions.
They are runtime conventions, not examples: ``samzapy generate end-of-stream`` writes the
control records, the Spark replay carries the headers through:

* **Control records** (Samza's control messages): a record with the header
  ``samzapy.control`` is not data. ``end-of-stream`` says its partition will carry no more
  data (Samza's ``EndOfStreamMessage``; ``samzapy generate end-of-stream TOPIC`` appends one
  to every partition of a topic); ``watermark`` carries a source's progress, as JSON
  ``{"source": ..., "watermark": ms}``.
* **Lineage** (header ``samzapy.lineage``): an event-time repartition stage tags every record
  it forwards with ``source|sequence|progress`` — its own input partition, the input offset
  and the largest event time that source had seen *before* the record. A downstream task
  decides lateness from the tag, i.e. from the record's own source, which is deterministic,
  and drops re-sent duplicates by sequence (a source's records reach a partition in order).
* **Per-source watermarks** (:class:`EventTime`): a task's watermark is the minimum, over its
  sources, of each source's progress, minus the allowed lateness (Flink/Samza take the
  minimum over input channels; a task's own max alone would race ahead of a slower input
  and declare the other input's records late). Sources are the task's input streams, or the
  upstream tasks of a repartition stage. Everything is kept in a store, so it never goes back.

>>> lineage_header("3", 17, 1000)
('samzapy.lineage', b'3|17|1000')
>>> Lineage.parse(b"3|17|1000")
Lineage(source='3', sequence=17, progress=1000)
>>> late_bound(MIN_MS, 600_000) == MIN_MS
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from samzapy.errors import TaskError
from samzapy.operators.key_encoding import MAX_MS, MIN_MS, decode_u64, encode_u64
from samzapy.operators.sliding import SlidingWindows
from samzapy.operators.state_layout import ALL, MAX, MIN, SUM, TaskEntries
from samzapy.operators.watermark import Watermark
from samzapy.operators.windows import HoppingWindows, SessionWindows, TumblingWindows
from samzapy.stores.base import KeyValueStore
from samzapy.streams import SystemStream
from samzapy.task import IncomingMessageEnvelope

CONTROL_HEADER = "samzapy.control"
LINEAGE_HEADER = "samzapy.lineage"
END_OF_STREAM = b"end-of-stream"
WATERMARK = b"watermark"
#: A source says it is idle (issue 19): it sent nothing for its idle timeout, so it stops
#: holding the watermark back until its next record.
IDLE = b"idle"


class EventTimeError(TaskError):
    """A record does not fit the event-time setup (an unknown source, a bad header)."""


@dataclass(frozen=True, slots=True)
class Control:
    """A control record.

    Its kind (``end-of-stream`` or ``watermark``), the source it speaks for (``None`` when it
    came straight from a producer: then it is the input partition's), and, for a watermark, the
    time.
    """

    kind: bytes
    source: str | None
    watermark: int


def _header(envelope: IncomingMessageEnvelope, name: str) -> bytes | None:
    found = None
    for key, value in envelope.headers:
        if key == name:
            found = value
    return found


def control_of(envelope: IncomingMessageEnvelope) -> Control | None:
    """The control record in ``envelope``, or ``None`` for data."""
    kind = _header(envelope, CONTROL_HEADER)
    if kind is None:
        return None
    body = envelope.message if isinstance(envelope.message, dict) else {}
    if kind == END_OF_STREAM:
        return Control(kind, body.get("source"), MAX_MS)
    if kind in (WATERMARK, IDLE):
        return Control(kind, body.get("source"), int(body["watermark"]))
    msg = (
        f"unknown control record kind {kind!r} at {envelope.system_stream_partition} offset {envelope.offset}"
    )
    raise EventTimeError(msg)


def end_of_stream_record(source: str | None = None) -> tuple[list[tuple[str, bytes]], bytes]:
    """(headers, JSON value) of an end-of-stream control record.

    >>> end_of_stream_record()
    ([('samzapy.control', b'end-of-stream')], b'{"control":"end-of-stream"}')
    """
    body: dict[str, Any] = {"control": "end-of-stream"}
    if source is not None:
        body["source"] = source
    return [(CONTROL_HEADER, END_OF_STREAM)], orjson.dumps(body)


def control_message(
    kind: bytes, source: str, watermark: int
) -> tuple[list[tuple[str, bytes]], dict[str, Any]]:
    """(headers, message) of a control record sent by a task, for its output serde."""
    body: dict[str, Any] = {"control": kind.decode(), "source": source}
    if kind in (WATERMARK, IDLE):
        body["watermark"] = watermark
    return [(CONTROL_HEADER, kind)], body


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a repartitioned record came from.

    The upstream source (its input partition), the sequence number (input offset) and the
    source's progress before the record.
    """

    source: str
    sequence: int
    progress: int

    @classmethod
    def parse(cls, raw: bytes) -> Lineage:
        """Parse a ``samzapy.lineage`` header value."""
        source, sequence, progress = raw.decode().split("|")
        return cls(source, int(sequence), int(progress))


def lineage_header(source: str, sequence: int, progress: int) -> tuple[str, bytes]:
    """The ``samzapy.lineage`` header of a forwarded record."""
    return LINEAGE_HEADER, f"{source}|{sequence}|{progress}".encode()


def lineage_of(envelope: IncomingMessageEnvelope) -> Lineage | None:
    """The lineage of ``envelope``, or ``None`` when it was not forwarded by a repartition stage."""
    raw = _header(envelope, LINEAGE_HEADER)
    if raw is None:
        return None
    try:
        return Lineage.parse(raw)
    except ValueError:
        msg = (
            f"bad {LINEAGE_HEADER} header {raw!r} at {envelope.system_stream_partition} offset "
            f"{envelope.offset}: expected 'source|sequence|progress'"
        )
        raise EventTimeError(msg) from None


def late_bound(progress: int, allowed_lateness_ms: int) -> int:
    """Windows ending at or before this are closed for a record whose source had seen up to ``progress``.

    ``MIN_MS``: nothing seen, nothing closed.
    """
    if progress in (MIN_MS, MAX_MS):
        return progress
    return max(MIN_MS + 1, progress - allowed_lateness_ms)


def window_closed(assigner: Any, time_ms: int, bound: int) -> bool:
    """Whether every window that could hold a record at ``time_ms`` ends at or before ``bound``.

    ``assigner`` is a :class:`TumblingWindows`, :class:`HoppingWindows`,
    :class:`SessionWindows` or :class:`SlidingWindows`; anything else (count windows) has no
    event-time end, so nothing is closed. ``bound`` is usually :func:`late_bound`'s.
    """
    if isinstance(assigner, TumblingWindows):
        # The end of the tumbling window, without the assigner's list (once per record).
        return time_ms - (time_ms - assigner.offset_ms) % assigner.size_ms + assigner.size_ms <= bound
    if isinstance(assigner, SessionWindows):
        return time_ms + assigner.gap_ms <= bound
    if isinstance(assigner, SlidingWindows):
        return time_ms + assigner.difference_ms + 1 <= bound
    if isinstance(assigner, HoppingWindows):
        return assigner.assign(time_ms)[-1][1] <= bound
    return False


class EventTime:
    r"""The progress of each source and the task's watermark, kept in a store.

    Promises:
        * :attr:`watermark` is ``min(progress of each source) - allowed_lateness_ms`` (or
          ``MAX_MS`` once every source has ended), and never goes back — across restarts
          too, since both the progress values and the watermark live in ``store``.
        * Before every source has made progress, the watermark stays at ``MIN_MS``: a silent
          source holds it back (as in Flink without idleness detection); an end-of-stream
          record releases it, and so does an ``idle`` control record (:meth:`idle`): an idle
          source is left out of the minimum until its next record (Flink's source idleness);
          once every source is idle, the watermark moves to the largest progress among them.
          The idle flags are kept in the store too, and they come from control records in
          the input, so a replay of the same input takes the same decisions.

    Store keys: ``namespace + b"\x00wm"`` (the watermark) and ``namespace + b":" + source +
    b"\x00wm"`` per source; ``namespace + b":" + source + b"\x00id"`` while it is idle.
    """

    def __init__(
        self,
        store: KeyValueStore[bytes, bytes],
        sources: Sequence[str],
        allowed_lateness_ms: int = 0,
        *,
        namespace: bytes = b"et",
    ) -> None:
        if not sources:
            msg = "EventTime needs at least one source"
            raise ValueError(msg)
        if allowed_lateness_ms < 0:
            msg = f"allowed lateness must be >= 0, got {allowed_lateness_ms}"
            raise ValueError(msg)
        self.allowed_lateness_ms = allowed_lateness_ms
        self._progress = {s: Watermark(store, namespace=namespace + b":" + s.encode()) for s in sources}
        #: The task's watermark, to hand to windows, joins and timers.
        self.watermark = Watermark(store, namespace=namespace)
        # --- idle sources (issue 19): flags in the store, mirrored here (read once at start).
        self._store = store
        self._idle_keys = {s: namespace + b":" + s.encode() + b"\x00id" for s in sources}
        self._idle = {s for s, key in self._idle_keys.items() if store.get(key) is not None}

    @property
    def sources(self) -> list[str]:
        """The sources, in configuration order."""
        return list(self._progress)

    def progress(self, source: str) -> int:
        """The largest event time seen from ``source``."""
        return self._source(source).current

    def advance(self, source: str, time_ms: int) -> bool:
        """Record that ``source`` has reached ``time_ms`` (it is active again if it was idle).

        True when the watermark advanced.
        """
        resumed = source in self._idle and self._active(source)
        if not self._source(source).advance_to(time_ms) and not resumed:
            return False
        return self._recompute()

    def idle(self, source: str) -> bool:
        """``source`` is idle.

        Leave it out of the minimum until its next record; True when the watermark advanced.
        """
        self._source(source)
        if source not in self._idle:
            self._idle.add(source)
            self._store.put(self._idle_keys[source], b"1")
        return self._recompute()

    def _active(self, source: str) -> bool:
        self._idle.discard(source)
        self._store.delete(self._idle_keys[source])
        return True

    def _recompute(self) -> bool:
        active = [w.current for s, w in self._progress.items() if s not in self._idle]
        # Every source idle: none will move time on, so what they reached is flushed (the
        # largest progress, as Flink's watermark valve does). Otherwise the order in which the
        # sources went idle would decide whether windows ever close.
        low = min(active) if active else max(w.current for w in self._progress.values())
        if low == MIN_MS:
            return False
        return self.watermark.advance_to(late_bound(low, self.allowed_lateness_ms))

    def end(self, source: str) -> bool:
        """``source`` has ended; True when the watermark advanced."""
        return self.advance(source, MAX_MS)

    def ended(self) -> bool:
        """Whether every source has ended."""
        return all(w.current == MAX_MS for w in self._progress.values())

    def _source(self, source: str) -> Watermark:
        found = self._progress.get(source)
        if found is None:
            msg = (
                f"a record came from source '{source}', but the task's sources are "
                f"{', '.join(self._progress)}; check watermark.upstream.tasks (the partition count "
                "of the upstream job's input) or the task's inputs"
            )
            raise EventTimeError(msg)
        return found


class SequenceDedup:
    """Drops records re-sent by an upstream task after its crash, by per-source sequence.

    A source sends its records to each partition in increasing sequence (its input offsets);
    after a crash it resends from its last checkpoint, so a record whose sequence is not above
    the last one seen from its source is a duplicate. Exact (no false positives, no expiry) and
    one store key per source; unlike :class:`samzapy.operators.Deduplicator` it needs ordered
    sources, which a repartition stage gives.
    """

    def __init__(self, store: KeyValueStore[bytes, bytes], *, namespace: bytes = b"sq") -> None:
        self._store = store
        self._prefix = namespace + b"\x00"

    def is_duplicate(self, source: str, sequence: int) -> bool:
        """True when ``sequence`` was already seen from ``source``; else remembers it."""
        key = self._prefix + source.encode()
        last = self._store.get(key)
        if last is not None and sequence <= decode_u64(last):
            return True
        self._store.put(key, encode_u64(sequence))
        return False


class StoredCounter:
    """A counter kept in a store.

    Exactly-once across crashes (it is restored with the state it counts), unlike a metrics
    counter, which restarts at zero with the process.
    """

    def __init__(self, store: KeyValueStore[bytes, bytes], key: bytes) -> None:
        self._store = store
        self._key = key

    @property
    def value(self) -> int:
        """The current count."""
        stored = self._store.get(self._key)
        return 0 if stored is None else decode_u64(stored)

    def inc(self, n: int = 1) -> None:
        """Add ``n``."""
        self._store.put(self._key, encode_u64(self.value + n))


def event_time_entries(namespace: bytes = b"et") -> tuple[TaskEntries, ...]:
    """:class:`EventTime`'s entries in a layout's task-own entries.

    The watermark and each source's progress (a reshard keeps the smallest, ``min``), each
    source's idle flag (kept only where every old task had it, ``all``).
    """
    return (TaskEntries(namespace, MIN, b"\x00wm"), TaskEntries(namespace + b":", ALL, b"\x00id"))


def sequence_entries(namespace: bytes = b"sq") -> tuple[TaskEntries, ...]:
    """:class:`SequenceDedup`'s last sequence per source (a reshard keeps the largest, ``max``)."""
    return (TaskEntries(namespace + b"\x00", MAX),)


def counter_entries(key: bytes) -> tuple[TaskEntries, ...]:
    """A :class:`StoredCounter` at ``key`` (a reshard adds the old tasks' counts, ``sum``)."""
    return (TaskEntries(key, SUM),)


def input_streams(inputs: Iterable[SystemStream]) -> list[str]:
    """The stream names (without system) of ``inputs`` (a task's ``context.inputs``)."""
    return [stream.stream for stream in inputs]

"""A faster decoder of fetched record batches for kafka-python's consumer.

kafka-python decodes every record of a fetch response in pure Python (a varint at a time);
on these machines that is ~5 us of the ~7 us a consumed record costs, the largest single part
of a restore and a fifth of the window count. aiokafka ships the same record format's decoder
as a C extension (``aiokafka.record._crecords``), ten times faster per record. This module
plugs it into kafka-python's ``Fetcher`` for one consumer at a time: the fetch, the offsets,
the positions and the errors stay kafka-python's; only the bytes of a fetched partition are
turned into ``ConsumerRecord``s by the C decoder, all at once, and handed out by ``take``.

The fast decoder takes a fetched partition when its batches are format v2, no key/value
deserializers are configured, and it is not a read_committed read with aborted transactions
to filter; anything else (legacy message sets, say) goes to kafka-python's own
``PartitionRecords`` unchanged. Within a fetch, compressed batches are decoded by
kafka-python's batch class (so codecs behave exactly as before), the others by the C one. Like
:mod:`samzapy.kafka.fast_append`, it relies on kafka-python internals (``Fetcher.PartitionRecords``
and its fields) and on aiokafka's private C module, so it is enabled only for the kafka-python
and aiokafka versions it was checked against (the ranges ``pyproject.toml`` pins) and can be
switched off with ``SAMZAPY_CONSUMER_FAST_DECODE=0``. Whether it is on, and why not, is
:func:`off_reason` (public through :func:`samzapy.kafka.fast_paths()`, logged once at start).
This module imports kafka-python internals at import time: import it through
:mod:`samzapy.kafka.fast_paths()`, which turns an ``ImportError`` into "off, and why".
"""

from __future__ import annotations

import logging
import os
import struct
from functools import partial
from typing import Any, NamedTuple

import kafka
import kafka.errors as Errors
from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord, Fetcher, IsolationLevel
from kafka.record.default_records import DefaultRecordBatch

try:  # the C extension only: aiokafka's pure-Python fallback is no faster than kafka-python's
    from aiokafka.record._crecords.default_records import DefaultRecordBatch as _CBatch

    _C_IMPORT_ERROR: str | None = None
except ImportError as _exc:  # pragma: no cover - depends on how aiokafka was installed
    _CBatch = None
    _C_IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"

log = logging.getLogger(__name__)


class RawRecord(NamedTuple):
    """A consumed record reduced to what a reader of a changelog needs (``raw=True`` in :func:`install`).

    Building one costs about half of a ``ConsumerRecord``, which also carries topic, partition,
    timestamps and sizes. The fields keep ``ConsumerRecord``'s names, so code reading these four
    takes either.
    """

    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


#: The name of this fast path in :func:`samzapy.kafka.fast_paths()`.
NAME = "consumer-decode"
#: kafka-python versions whose ``Fetcher.PartitionRecords`` this module was checked against.
SUPPORTED_VERSIONS = ("3.0.",)
#: aiokafka versions whose ``_crecords.DefaultRecordBatch`` this module was checked against.
SUPPORTED_AIOKAFKA = ("0.14.",)

# Record batch v2 header fields used to choose a decoder (KIP-98 layout).
_LENGTH = struct.Struct(">i")  # at 8: bytes after the first 12
_LEADER_EPOCH = struct.Struct(">i")  # at 12
_ATTRIBUTES = struct.Struct(">h")  # at 21
_LOG_OVERHEAD = 12
_MAGIC_AT = 16
_HEADER_SIZE = 61
_COMPRESSION_MASK = 0x07


def off_reason() -> str | None:
    """Why the fast decoder may not be used in this process, or ``None`` when it may."""
    if os.environ.get("SAMZAPY_CONSUMER_FAST_DECODE", "1") == "0":
        return "switched off by SAMZAPY_CONSUMER_FAST_DECODE=0"
    slower = "records are decoded by kafka-python in Python, several times slower"
    if not kafka.__version__.startswith(SUPPORTED_VERSIONS):
        return (
            f"kafka-python {kafka.__version__} is not a version it was checked against "
            f"({', '.join(v + 'x' for v in SUPPORTED_VERSIONS)}): {slower}; install the kafka-python "
            "range pyproject.toml pins"
        )
    if _CBatch is None:
        return (
            f"aiokafka's C record decoder does not import ({_C_IMPORT_ERROR}): {slower}; install "
            "aiokafka from a binary wheel (pip install --only-binary aiokafka 'aiokafka>=0.14,<0.15')"
        )
    version = aiokafka_version()
    if not version.startswith(SUPPORTED_AIOKAFKA):
        return (
            f"aiokafka {version} is not a version its C decoder was checked against "
            f"({', '.join(v + 'x' for v in SUPPORTED_AIOKAFKA)}): {slower}; install the aiokafka "
            "range pyproject.toml pins"
        )
    return None


def aiokafka_version() -> str:
    """The installed aiokafka's version (``"?"`` when it does not say)."""
    import aiokafka

    return str(getattr(aiokafka, "__version__", "?"))


def available() -> bool:
    """Whether the fast decoder may be used.

    Supported kafka-python and aiokafka, aiokafka's C extension importable, and not switched
    off.
    """
    return off_reason() is None


def on_reason() -> str:
    """What an active fast decoder runs on, for the start-up log."""
    return f"kafka-python {kafka.__version__} with aiokafka {aiokafka_version()}'s C record decoder"


def install(consumer: KafkaConsumer, *, raw: bool = False, native: bool = False) -> bool:
    """Make ``consumer`` decode eligible fetches with the C decoder; returns whether it did.

    Only this consumer is affected (nothing in kafka-python is patched globally). ``raw``: the
    decoded records are :class:`RawRecord`s (fetches the C decoder does not take are still
    kafka-python's ``ConsumerRecord``s, with the same four fields). ``native``: the decoded
    records are the batch decoder's own record objects (aiokafka's C ``DefaultRecord``, or
    kafka-python's for a compressed batch), which promise only ``offset``, ``key``, ``value``
    and ``headers`` as attributes; about half the cost of a ``RawRecord`` each.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    if not available() or not isinstance(fetcher, Fetcher):
        return False
    if native:
        fetcher.PartitionRecords = partial(partition_records, raw="native")
    else:
        fetcher.PartitionRecords = partial(partition_records, raw=True) if raw else partition_records
    return True


def partition_records(
    fetch_offset: int,
    tp: TopicPartition,
    records: Any,
    key_deserializer: Any = None,
    value_deserializer: Any = None,
    check_crcs: bool = True,
    isolation_level: Any = IsolationLevel.READ_UNCOMMITTED,
    aborted_transactions: Any = None,
    metric_aggregator: Any = None,
    on_drain: Any = lambda _records: None,
    *,
    raw: bool | str = False,
) -> Fetcher.PartitionRecords:
    """kafka-python's ``PartitionRecords`` constructor, with the same arguments.

    The fast decoder's records when the fetch is eligible (module docstring), kafka-python's
    otherwise (``raw``: the fast decoder's are :class:`RawRecord`s; ``"native"``: the batch
    decoder's own records, see :func:`install`).
    """
    buffer = records._buffer
    eligible = (
        key_deserializer is None
        and value_deserializer is None
        and not (isolation_level == IsolationLevel.READ_COMMITTED and aborted_transactions)
        and _all_v2(buffer)
    )
    if eligible:
        return DecodedPartitionRecords(
            fetch_offset, tp, buffer, check_crcs=check_crcs,
            metric_aggregator=metric_aggregator, on_drain=on_drain, raw=raw,
        )  # fmt: skip
    return Fetcher.PartitionRecords(
        fetch_offset, tp, records, key_deserializer=key_deserializer,
        value_deserializer=value_deserializer, check_crcs=check_crcs,
        isolation_level=isolation_level, aborted_transactions=aborted_transactions,
        metric_aggregator=metric_aggregator, on_drain=on_drain,
    )  # fmt: skip


def _batch_bounds(buffer: Any) -> list[tuple[int, int]]:
    """(start, end) of every complete batch in a fetched buffer.

    A partial batch at the end (the broker cuts fetches at a size limit) is left out, as
    kafka-python does.
    """
    bounds = []
    pos, size = 0, len(buffer)
    while size - pos >= _LOG_OVERHEAD:
        end = pos + _LOG_OVERHEAD + _LENGTH.unpack_from(buffer, pos + 8)[0]
        if end > size:
            break
        bounds.append((pos, end))
        pos = end
    return bounds


def _all_v2(buffer: Any) -> bool:
    """Whether every complete batch is in format v2."""
    return all(
        end - start >= _HEADER_SIZE and buffer[start + _MAGIC_AT] == 2 for start, end in _batch_bounds(buffer)
    )


class DecodedPartitionRecords(Fetcher.PartitionRecords):  # type: ignore[misc]  # kafka-python ships no types
    """One fetched partition's records, decoded a batch at a time.

    One fetched partition's records, decoded a batch at a time as ``take`` needs them (the C
    decoder for uncompressed batches) and handed out exactly as kafka-python's
    ``PartitionRecords`` does: records before the fetch offset skipped, control batches skipped,
    positions advanced past the last batch, and a CRC failure raised (naming partition and
    offset) only after the records before it.
    """

    def __init__(
        self,
        fetch_offset: int,
        tp: TopicPartition,
        buffer: Any,
        *,
        check_crcs: bool,
        metric_aggregator: Any,
        on_drain: Any,
        raw: bool | str = False,
    ) -> None:
        self.fetch_offset = fetch_offset
        self.topic_partition = tp
        self.leader_epoch = -1
        self.next_fetch_offset = fetch_offset
        self.bytes_read = 0
        self.records_read = 0
        self.metric_aggregator = metric_aggregator
        self.on_drain = on_drain
        self._next_inline_exception: Exception | None = None
        self.record_iterator: Any = True  # kafka-python's "not drained" marker
        self._buffer = buffer
        self._check_crcs = check_crcs
        self._bounds = _batch_bounds(buffer)
        self._next_batch = 0
        self._raw = raw
        self._decoded: list[Any] = []  # the current batch's records
        self._taken = 0  # of them
        self._epoch = -1  # the leader epoch of the batch being handed out
        self._end_offset = fetch_offset
        self._error: Exception | None = None

    def _decode_next_batch(self) -> None:
        """Decode the next batch into ``_decoded`` (empty for a control batch).

        On a CRC failure set ``_error`` and stop decoding.
        """
        buffer = self._buffer
        start, end = self._bounds[self._next_batch]
        self._next_batch += 1
        view = memoryview(buffer)[start:end]
        if _ATTRIBUTES.unpack_from(buffer, start + 21)[0] & _COMPRESSION_MASK:
            batch = DefaultRecordBatch(bytes(view))
        else:
            batch = _CBatch(view)
        self._decoded, self._taken = [], 0
        if self._check_crcs and not batch.validate_crc():
            self._error = Errors.CorruptRecordError(
                f"Record batch for partition {self.topic_partition} at offset "
                f"{batch.base_offset} failed crc check"
            )
            return
        self.bytes_read += end - start
        self._end_offset = batch.next_offset
        if batch.is_control_batch:
            return
        epoch = self._epoch = _LEADER_EPOCH.unpack_from(buffer, start + 12)[0]
        fetch_offset = self.fetch_offset
        if self._raw == "native":
            # No object per record beyond the decoder's own: a whole batch at or after the
            # fetch offset is taken as it is (the common case), the first one filtered.
            if batch.base_offset >= fetch_offset:
                self._decoded = list(batch)
            else:
                self._decoded = [record for record in batch if record.offset >= fetch_offset]
            return
        append = self._decoded.append
        if self._raw:
            new_raw = tuple.__new__
            for record in batch:
                offset = record.offset
                if offset >= fetch_offset:
                    append(new_raw(RawRecord, (offset, record.key, record.value, record.headers)))
            return
        topic, partition = self.topic_partition.topic, self.topic_partition.partition
        new_record = ConsumerRecord._make
        for record in batch:
            offset = record.offset
            if offset < fetch_offset:
                continue
            key, value, headers = record.key, record.value, record.headers
            append(new_record((
                topic, partition, epoch, offset, record.timestamp, record.timestamp_type,
                key, value, headers, None,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
                _header_size(headers) if headers else -1,
            )))  # fmt: skip

    def _batches_left(self) -> bool:
        return self._error is None and self._next_batch < len(self._bounds)

    def take(self, n: int | None = None) -> list[Any]:
        """Up to ``n`` records (all when None) from where the last ``take`` stopped."""
        self._maybe_raise_next_inline_exception()
        if self.record_iterator is None:
            return []
        wanted = len(self._bounds) << 32 if n is None else n  # more than any fetch holds
        taken: list[Any] = []
        epoch = self.leader_epoch  # of the batch the last record taken came from
        while len(taken) < wanted:
            if self._taken == len(self._decoded):
                if not self._batches_left():
                    break
                self._decode_next_batch()
                continue
            stop = min(len(self._decoded), self._taken + wanted - len(taken))
            taken += self._decoded[self._taken : stop]
            self._taken, epoch = stop, self._epoch
        if taken:
            self.next_fetch_offset = taken[-1].offset + 1
            self.leader_epoch = epoch
            self.records_read += len(taken)
        if self._taken == len(self._decoded) and not self._batches_left():
            if self._error is None:
                # v2 batches keep their last offset even when compaction removed the record:
                # continue after the batch, or the same batch would be fetched again.
                self.next_fetch_offset = max(self.next_fetch_offset, self._end_offset)
                self.drain()
            elif not taken:  # the records before the corrupt batch went out with the last take
                self.drain()  # the next poll fetches the corrupt batch again and fails again
                raise self._error
        return taken


def _header_size(headers: list[tuple[str, bytes | None]]) -> int:
    return sum(len(key.encode("utf-8")) + (len(value) if value is not None else 0) for key, value in headers)

"""Record batches of the producer's fast path built by aiokafka's C builder.

kafka-python encodes each appended record in Python (``DefaultRecordBatchBuilder.append``,
about 2.4 us a record here); aiokafka ships the same v2 batch format's builder as a C extension
(about 0.4 us). :func:`adopt` gives one new batch of :mod:`samzapy.kafka.fast_append` the C
builder: the batch keeps kafka-python's ``MemoryRecordsBuilder`` (the accumulator and sender
see no difference), only the encoder behind it changes, before any record but the first is
in it. Nothing is patched globally; batches made by ``KafkaProducer.send`` keep kafka-python's
builder.

The two builders write the same bytes but for one header field: the partition leader epoch,
which the C builder sets to -1 (as the Java producer does) and kafka-python to 0; the broker
assigns it, and the CRC does not cover it. Uncompressed batches only (a compressed batch keeps
kafka-python's builder, whose codecs samzapy configures). Relies on private parts of both
clients, so it is used only with the versions it was checked against (those of
:mod:`samzapy.kafka.fast_decode`), and ``SAMZAPY_PRODUCER_C_BUILDER=0`` turns it off.
"""

from __future__ import annotations

import os
from typing import Any

try:  # the C extension only: the pure-Python fallback is kafka-python's own code again
    from aiokafka.record._crecords.default_records import DefaultRecordBatchBuilder as _CBuilder

    _IMPORT_ERROR: str | None = None
except ImportError as _exc:  # pragma: no cover - depends on how aiokafka was installed
    _CBuilder = None
    _IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"

_MAGIC_V2 = 2
_NO_COMPRESSION = 0


def off_reason() -> str | None:
    """Why the C builder may not be used in this process, or ``None`` when it may."""
    if os.environ.get("SAMZAPY_PRODUCER_C_BUILDER", "1") == "0":
        return "switched off by SAMZAPY_PRODUCER_C_BUILDER=0"
    if _CBuilder is None:
        return f"aiokafka's C record builder does not import ({_IMPORT_ERROR})"
    try:  # kafka-python internals it needs are missing in other kafka-python versions
        from samzapy.kafka import fast_decode
    except ImportError as exc:
        return f"kafka-python internals do not import ({type(exc).__name__}: {exc})"
    return fast_decode.off_reason()  # the same client versions and the same C extension


class _Builder:
    """kafka-python's batch-builder interface over aiokafka's C builder.

    The per-record calls go straight to C; ``set_producer_state`` drops the transactional flag,
    which the C builder takes at construction (the fast path never serves a transactional
    producer).
    """

    __slots__ = ("_c", "append", "build", "size")

    def __init__(self, c_builder: Any) -> None:
        self._c = c_builder
        self.append = c_builder.append
        self.build = c_builder.build
        self.size = c_builder.size

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        self._c.set_producer_state(producer_id, producer_epoch, base_sequence)

    @property
    def producer_id(self) -> int:
        return int(self._c.producer_id)

    @property
    def producer_epoch(self) -> int:
        return int(self._c.producer_epoch)

    @property
    def base_sequence(self) -> int:
        return int(self._c.base_sequence)


def adopt(
    records: Any,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes]],
) -> bool:
    """Hand a new batch's first record to the C builder; whether it did.

    Give ``records`` (a new batch's ``MemoryRecordsBuilder`` holding only the record
    ``timestamp_ms, key, value, headers``) the C builder, with that record in it; whether it
    did. Call it under the partition's accumulator lock, before anything else is appended.
    """
    if (
        records._closed
        or records._magic != _MAGIC_V2
        or records.next_offset() != 1
        or records._builder is None
        or records._builder._compression_type != _NO_COMPRESSION
        or records._builder._is_transactional
    ):
        return False
    old = records._builder
    c_builder = _CBuilder(
        _MAGIC_V2,
        _NO_COMPRESSION,
        0,
        old.producer_id,
        old.producer_epoch,
        old.base_sequence,
        old._batch_size,
    )
    if c_builder.append(0, timestamp_ms, key, value, headers) is None:
        return False  # cannot happen for a record kafka-python fitted; keep its builder
    records._builder = _Builder(c_builder)
    return True

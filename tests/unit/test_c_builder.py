"""aiokafka's C builder behind kafka-python's MemoryRecordsBuilder (samzapy.kafka.c_builder):
the batches it builds decode to exactly the records kafka-python's own builder writes, with
the producer state an idempotent producer sets when the batch is drained."""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from samzapy.kafka import c_builder

RECORDS = [
    (1_700_000_000_000, b"key-0", b"value-0", [("samzapy.id", b"a0")]),
    (1_700_000_000_007, None, b"no key", []),
    (1_700_000_000_009, b"tombstone", None, [("h", b"")]),
    (1_700_000_000_010, b"k" * 300, b"v" * 5_000, [("one", b"1"), ("two", b"22")]),
]


def decoded(buffer: bytes) -> list[tuple]:
    batch = MemoryRecords(buffer).next_batch()
    return [
        (batch.producer_id, batch.producer_epoch, batch.base_sequence),
        *[(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch],
    ]


def built(adopt: bool, producer_state: tuple[int, int, int] | None = None) -> bytes:
    records = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    first = RECORDS[0]
    assert records.append(*first) is not None
    if adopt:
        assert c_builder.adopt(records, *first)
    for record in RECORDS[1:]:
        metadata = records.append(*record)
        assert metadata is not None and metadata.timestamp == record[0]
    if producer_state is not None:
        records.set_producer_state(*producer_state, False)
    records.close()
    return bytes(records.buffer())


def test_the_c_builder_is_on_with_the_pinned_clients() -> None:
    assert c_builder.off_reason() is None


@pytest.mark.parametrize("producer_state", [None, (4711, 3, 120)])
def test_a_batch_built_in_c_decodes_to_the_records_kafka_python_builds(
    producer_state: tuple[int, int, int] | None,
) -> None:
    python, c = built(False, producer_state), built(True, producer_state)
    assert decoded(c) == decoded(python)
    assert decoded(c)[0] == (producer_state or (-1, -1, -1))
    # the same bytes but the partition leader epoch (bytes 12-15), which the broker assigns
    assert len(c) == len(python) and c[:12] == python[:12] and c[16:] == python[16:]


def test_a_closed_compressed_or_used_batch_keeps_kafka_pythons_builder() -> None:
    first = RECORDS[0]
    compressed = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=1 << 20)
    compressed.append(*first)
    two = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    two.append(*first)
    two.append(*RECORDS[1])
    closed = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    closed.append(*first)
    closed.close()
    assert not any(c_builder.adopt(records, *first) for records in (compressed, two, closed))


def test_switched_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMZAPY_PRODUCER_C_BUILDER", "0")
    assert c_builder.off_reason() == "switched off by SAMZAPY_PRODUCER_C_BUILDER=0"

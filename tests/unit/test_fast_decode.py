"""The C decoder of fetched batches gives exactly what kafka-python's own decoder gives.

Both decoders get the same bytes (real v2 record batches built by kafka-python's builder) and
are drained through the same ``take`` calls; records, positions and leader epochs must match.
"""

from __future__ import annotations

import struct

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from samzapy.kafka import FastPath, fast_decode, fast_paths
from samzapy.kafka.fast_decode import DecodedPartitionRecords, RawRecord, partition_records


@pytest.fixture(autouse=True)
def _c_decoder_installed() -> None:
    """Fail, not skip, when the C decoder is off: the pinned aiokafka ships it."""
    state = fast_paths()[1]
    assert state.name == "consumer-decode"
    assert state.active, state.reason


TP = TopicPartition("views", 3)
_CRC_AT, _ATTRIBUTES_AT, _LAST_DELTA_AT = 17, 21, 23


def batch(base_offset: int, records: list[tuple], *, leader_epoch: int = 0, compression: int = 0) -> bytes:
    """One v2 batch; ``records`` are (offset delta, key, value, headers)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for delta, key, value, headers in records:
        builder.append(delta, timestamp=1_700_000_000_000 + delta, key=key, value=value, headers=headers)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)  # outside the CRC, as a broker sets it
    return bytes(data)


def rewrite(data: bytes, *, attributes_or: int = 0, last_offset_delta: int | None = None) -> bytes:
    """The batch with header fields changed and its CRC recomputed (as a broker would have it)."""
    out = bytearray(data)
    attributes = struct.unpack_from(">h", out, _ATTRIBUTES_AT)[0] | attributes_or
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes)
    if last_offset_delta is not None:
        struct.pack_into(">i", out, _LAST_DELTA_AT, last_offset_delta)
    struct.pack_into(">I", out, _CRC_AT, calc_crc32c(bytes(out[_ATTRIBUTES_AT:])))
    return bytes(out)


def views(count: int, start: int = 0) -> list[tuple]:
    rows = []
    for i in range(start, start + count):
        key = None if i % 5 == 0 else b"user-%d" % i
        value = None if i % 7 == 0 else b'{"page": "/p/%d"}' % i
        headers = [("trace", b"t%d" % i), ("empty", None)] if i % 3 == 0 else []
        rows.append((i - start, key, value, headers))
    return rows


def drain_both(
    buffer: bytes, fetch_offset: int, chunk: int | None, raw: bool | str = False
) -> tuple[list, list]:
    """Take everything from both decoders in chunks; each step is (records, position, epoch).
    ``raw``: the fast decoder makes ``RawRecord``s (``"native"``: its decoders' own records), and
    kafka-python's records are cut to the same four fields."""
    stock = Fetcher.PartitionRecords(fetch_offset, TP, MemoryRecords(buffer))
    fast = partition_records(fetch_offset, TP, MemoryRecords(buffer), raw=raw)
    assert isinstance(fast, DecodedPartitionRecords)
    steps = []
    for part in (stock, fast):
        taken = []
        while part:
            records = part.take(chunk)
            taken.append(([fields(r, raw) for r in records], part.next_fetch_offset, part.leader_epoch))
            if not records and part:
                records = part.take(chunk)  # kafka-python drains lazily, on the empty take
                taken.append(([fields(r, raw) for r in records], part.next_fetch_offset, part.leader_epoch))
        steps.append(taken)
    return steps[0], steps[1]


def fields(record: object, raw: bool | str) -> tuple:
    if raw:
        return (record.offset, record.key, record.value, record.headers)  # type: ignore[attr-defined]
    return tuple(record)  # type: ignore[arg-type]


def flatten(steps: list) -> tuple[list, int, int]:
    records = [r for taken, _, _ in steps for r in taken]
    return records, steps[-1][1], steps[-1][2]


def test_same_records_positions_and_epochs_as_kafka_python():
    buffer = batch(100, views(20), leader_epoch=4) + batch(120, views(30, 20), leader_epoch=5)
    for fetch_offset in (100, 107, 125):
        for chunk in (None, 7, 1):
            stock, fast = drain_both(buffer, fetch_offset, chunk)
            records, position, epoch = flatten(fast)
            assert (records, position, epoch) == flatten(stock)
            assert [r[3] for r in records] == list(range(fetch_offset, 150))
            assert position == 150 and epoch == 5
    first = flatten(drain_both(buffer, 100, None)[1])[0][3]
    assert first == ("views", 3, 4, 103, 1_700_000_000_003, 0, b"user-3", b'{"page": "/p/3"}',
                     [("trace", b"t3"), ("empty", None)], None, 6, 16, 12)  # fmt: skip


@pytest.mark.parametrize("raw", [True, "native"])
@pytest.mark.parametrize("chunk", [None, 7, 1])
def test_raw_records_carry_the_same_fields_positions_and_epochs(chunk, raw):
    """``raw=True`` (RawRecord tuples) and ``raw="native"`` (the decoders' own record objects,
    the Spark bulk restore's) carry the fields, positions and epochs of the stock decoder."""
    control = rewrite(batch(150, [(0, b"\x00\x00\x00\x01", b"", [])]), attributes_or=0x20)
    buffer = (
        batch(100, views(20), leader_epoch=4)
        + batch(120, views(30, 20), leader_epoch=5, compression=1)
        + control
        + batch(151, views(5, 51), leader_epoch=6)
    )
    for fetch_offset in (100, 107, 125, 151):
        stock, fast = drain_both(buffer, fetch_offset, chunk, raw=raw)
        assert [s for s in fast if s[0]] == [s for s in stock if s[0]]
        assert fast[-1][1:] == stock[-1][1:] == (156, 6)
    expected = (103, b"user-3", b'{"page": "/p/3"}', [("trace", b"t3"), ("empty", None)])
    first = partition_records(100, TP, MemoryRecords(buffer), raw=raw).take(4)[3]
    if raw is True:
        assert isinstance(first, RawRecord)
        assert first == RawRecord(*expected)
        assert first._replace(key=None).key is None
    else:
        assert not isinstance(first, tuple)  # not a RawRecord: no tuple per record
        assert fields(first, True) == expected


def test_positions_after_each_take_match():
    buffer = batch(0, views(10)) + batch(10, views(10, 10), leader_epoch=2)
    stock, fast = drain_both(buffer, 0, 4)
    # The fast decoder drains as soon as the last record is taken, kafka-python on the next
    # (empty) take: compare the non-empty steps and the final position.
    assert [s for s in fast if s[0]] == [s for s in stock if s[0]]
    assert fast[-1][1:] == stock[-1][1:] == (20, 2)


def test_partial_batch_at_the_end_is_left_for_the_next_fetch():
    whole = batch(0, views(5))
    cut = batch(5, views(5, 5))[:-9]
    stock, fast = drain_both(whole + cut, 0, None)
    assert flatten(fast) == flatten(stock)
    assert flatten(fast)[1] == 5


def test_control_batch_is_skipped_and_position_moves_past_it():
    control = rewrite(batch(5, [(0, b"\x00\x00\x00\x01", b"", [])]), attributes_or=0x20)
    buffer = batch(0, views(5)) + control + batch(6, views(3, 6))
    stock, fast = drain_both(buffer, 0, None)
    assert flatten(fast) == flatten(stock)
    assert [r[3] for r in flatten(fast)[0]] == [0, 1, 2, 3, 4, 6, 7, 8]


def test_compacted_tail_moves_position_past_the_batch():
    # Compaction removed offsets 13..14: the batch still says its last offset is 14.
    buffer = rewrite(batch(10, views(3, 10)), last_offset_delta=4)
    stock, fast = drain_both(buffer, 10, None)
    assert flatten(fast) == flatten(stock)
    assert flatten(fast)[1] == 15


def test_compressed_batches_mixed_in_decode_the_same():
    buffer = batch(0, views(4)) + batch(4, views(4, 4), compression=1) + batch(8, views(3, 8))  # gzip
    for fetch_offset in (0, 5):
        stock, fast = drain_both(buffer, fetch_offset, 3)
        assert flatten(fast) == flatten(stock)
        assert [r[3] for r in flatten(fast)[0]] == list(range(fetch_offset, 11))


def test_deserializers_go_to_kafka_pythons_decoder():
    class Upper:
        def deserialize(self, topic, headers, data):
            return data.upper() if data else data

    part = partition_records(0, TP, MemoryRecords(batch(0, views(3))), value_deserializer=Upper())
    assert type(part) is Fetcher.PartitionRecords
    assert part.take()[1].value == b'{"PAGE": "/P/1"}'


def test_corrupt_batch_fails_after_the_records_before_it():
    good = batch(0, views(5))
    bad = bytearray(batch(5, views(5, 5)))
    bad[-3] ^= 0xFF
    part = partition_records(0, TP, MemoryRecords(good + bytes(bad)))
    assert [r.offset for r in part.take()] == [0, 1, 2, 3, 4]
    assert part.next_fetch_offset == 5
    with pytest.raises(
        CorruptRecordError, match=r"partition TopicPartition\(topic='views', partition=3\) at offset 5"
    ):
        part.take()
    assert not part  # drained: the next poll fetches offset 5 again and fails again


def test_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("SAMZAPY_CONSUMER_FAST_DECODE", "0")
    assert not fast_decode.available()
    assert fast_paths()[1] == FastPath(
        "consumer-decode", False, "switched off by SAMZAPY_CONSUMER_FAST_DECODE=0"
    )

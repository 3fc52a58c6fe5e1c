"""The bulk restore's per-key reduction in Arrow gives exactly what a dict of last values gives.

No Spark and no broker: records in offset order go in, the sorted last values come out, and
they must equal the dict reduction the in-memory plan used before (the last record of a key
wins, a tombstone stays as ``None``, a record without a key is ignored), for every reduction
interval and after the switch to ``large_binary`` keys.
"""

from __future__ import annotations

import random
from typing import NamedTuple

import pytest

pytest.importorskip("pyarrow")

from samzapy.spark.restore import last_values  # noqa: E402 - after the importorskip
from samzapy.spark.restore.last_values import LastValues  # noqa: E402


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None


def changelog(count: int, keys: int, seed: int) -> list[Rec]:
    """Records with overwrites, tombstones (10 %) and keyless records (2 %), binary keys too."""
    rng = random.Random(seed)
    records = []
    for offset in range(count):
        key = None if rng.random() < 0.02 else b"k\x00\xff%05d" % rng.randrange(keys)
        value = None if rng.random() < 0.1 else b"v%d" % offset
        records.append(Rec(offset, key, value))
    return records


def expected(records: list[Rec]) -> tuple[list[bytes], list[bytes | None]]:
    latest: dict[bytes, bytes | None] = {}
    for record in records:
        if record.key is not None:
            latest[record.key] = record.value
    keys = sorted(latest)
    return keys, [latest[k] for k in keys]


@pytest.mark.parametrize(
    ("reduce_rows", "large_keys_bytes"), [(500_000, 1 << 30), (777, 1 << 30), (500, 5_000)]
)
def test_sorted_last_values_equal_a_dicts(monkeypatch, reduce_rows, large_keys_bytes):
    monkeypatch.setattr(last_values, "LARGE_KEYS_BYTES", large_keys_bytes)
    records = changelog(20_000, 3_000, seed=reduce_rows)
    reduction = LastValues(reduce_rows=reduce_rows)
    for start in range(0, len(records), 333):  # fetched batches of uneven size
        reduction.add(records[start : start + 333])
    keys, values = reduction.sorted_items()
    assert (keys, values) == expected(records)
    assert None in values  # tombstones reported, not dropped
    assert reduction.bytes == sum(len(r.key or b"") + len(r.value or b"") for r in records)
    assert str(reduction._key_type) == ("large_binary" if large_keys_bytes == 5_000 else "binary")


def test_nothing_and_only_keyless_records_give_nothing():
    assert LastValues().sorted_items() == ([], [])
    reduction = LastValues()
    reduction.add([Rec(0, None, b"x"), Rec(1, None, None)])
    assert reduction.sorted_items() == ([], [])
    assert reduction.bytes == 1

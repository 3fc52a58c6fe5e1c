"""The last value of each key of a changelog range, kept in Arrow instead of a dict.

The in-memory plan of the bulk restore (:mod:`samzapy.spark.restore.bulk`) reads a changelog
partition in offset order and keeps, per key, the value of its last record. Doing that with a
Python dict costs a hash insert per record and a Python sort of the keys; here each fetched
batch becomes two Arrow columns (keys, values), and Arrow's hash aggregation (the largest row
number per key) and sort do the rest in C++: about 0.36 instead of 0.50 us of CPU per record
for reduction, sort and SST writing on the benchmark's changelog (docs/performance.md).

Memory stays near "one partition's latest values", as the dict's did: the rows added since
the last reduction are reduced together with the already reduced ones once they pass
:data:`REDUCE_ROWS` rows or :data:`REDUCE_BYTES` bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

# At import (not in the methods): the Spark session's warm-up imports this module in every
# Python worker (samzapy.spark.session.EXECUTOR_MODULES), so no restore job pays for these.
import numpy as np
import pyarrow as pa
import pyarrow.acero  # noqa: F401 - what Table.group_by runs on
import pyarrow.compute as pc

#: Reduce the rows added so far once this many have arrived since the last reduction.
REDUCE_ROWS = 500_000
#: ... or once their keys and values hold this many bytes.
REDUCE_BYTES = 128 * 1024 * 1024
#: Keys are kept as Arrow ``binary`` (32-bit offsets: its hash aggregation is about 3x faster
#: than ``large_binary``'s) until the keys added hold this many bytes, then as ``large_binary``.
LARGE_KEYS_BYTES = 1 << 30

_key_of, _value_of = attrgetter("key"), attrgetter("value")


class LastValues:
    """Changelog records added in offset order -> the last value of each key, sorted by key.

    A record without a key is counted but not kept (restores ignore it); a tombstone (value
    ``None``) is kept as the key's last value, so that :meth:`sorted_items` can report it as a
    deletion. Keys sort bytewise, as RocksDB's default comparator and Python's ``bytes`` do.
    """

    def __init__(self, reduce_rows: int = REDUCE_ROWS, reduce_bytes: int = REDUCE_BYTES) -> None:
        self.reduce_rows, self.reduce_bytes = reduce_rows, reduce_bytes
        self.bytes = 0  # key and value bytes of every record added
        self._key_bytes = 0
        self._key_type: Any = None  # pa.binary(), then pa.large_binary() past LARGE_KEYS_BYTES
        self._reduced: Any = None  # pa.Table (k, v): one row per key
        self._pending: list[Any] = []  # pa.Tables (k, v) in offset order, not yet reduced
        self._pending_rows = self._pending_bytes = 0

    def add(self, records: Sequence[Any]) -> None:
        """Add ``records`` (with ``key`` and ``value``), the next ones in offset order."""
        if self._key_type is None:
            self._key_type = pa.binary()
        keys = pa.array(list(map(_key_of, records)), self._key_type)
        values = pa.array(list(map(_value_of, records)), pa.large_binary())
        key_bytes = _data_bytes(keys)
        size = key_bytes + _data_bytes(values)
        self.bytes += size
        self._key_bytes += key_bytes
        if self._key_bytes >= LARGE_KEYS_BYTES and self._key_type == pa.binary():
            self._widen_keys()
            keys = keys.cast(self._key_type)
        self._pending.append(pa.Table.from_arrays([keys, values], names=["k", "v"]))
        self._pending_rows += len(records)
        self._pending_bytes += size
        if self._pending_rows >= self.reduce_rows or self._pending_bytes >= self.reduce_bytes:
            self._reduce()

    def _widen_keys(self) -> None:
        """Keys as ``large_binary`` from now on: 32-bit offsets may not hold them all."""
        self._key_type = pa.large_binary()
        schema = pa.schema([("k", self._key_type), ("v", pa.large_binary())])
        self._pending = [table.cast(schema) for table in self._pending]
        if self._reduced is not None:
            self._reduced = self._reduced.cast(schema)

    def _reduce(self) -> None:

        tables = ([self._reduced] if self._reduced is not None else []) + self._pending
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        if not tables:
            return
        table = pa.concat_tables(tables)
        table = table.filter(pc.is_valid(table.column("k")))  # a record without a key: ignored
        # The last record of a key is its largest row number (rows are in offset order);
        # use_threads=False: two cores are shared with the rest of the Spark task.
        rows = table.append_column("i", pa.array(np.arange(table.num_rows, dtype=np.int64)))
        last = rows.group_by("k", use_threads=False).aggregate([("i", "max")]).column("i_max")
        self._reduced = table.take(last)

    def sorted_items(self) -> tuple[list[bytes], list[bytes | None]]:
        """Every key's last value, keys ascending (``None``: the last record was a tombstone)."""
        self._reduce()
        if self._reduced is None:
            return [], []
        ordered = self._reduced.sort_by("k")
        self._reduced = None
        return ordered.column("k").to_pylist(), ordered.column("v").to_pylist()


def _data_bytes(array: Any) -> int:
    """The bytes of a binary array's values (nulls count 0)."""
    total = pc.sum(pc.binary_length(array)).as_py()
    return int(total or 0)

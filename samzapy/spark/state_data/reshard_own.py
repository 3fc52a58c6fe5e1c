r"""What a reshard does with the tasks' own state: entries that belong to no key.

A key's entries move to the task that owns the key under the new count. A task's own entries
(its watermarks, the registry of ids it has decided, its counters) belong to no key, yet the
new tasks need them: they describe the keys the task held. So each goes to the new tasks that
may receive those keys, and where several old tasks send one, they are combined by the rule
the store's layout names (:class:`~samzapy.operators.state_layout.TaskEntries`).

**Which old tasks feed a new task.** The job's partitioner puts a key with hash ``h`` in task
``h mod N``; under the new count in ``h mod M``. Both hold for some ``h`` exactly when the two
tasks are congruent modulo ``g = gcd(N, M)`` (the Chinese remainder theorem; the hashes cover
every residue). So new task ``k`` may receive keys of exactly the old tasks ``j`` with
``j ≡ k (mod g)``: one old task when M is a multiple of N (4 -> 8: task 5 gets only old task
1's keys, and inherits its state unchanged), every old task when the counts are coprime. This
follows from the hashing alone, so a task's own state also reaches the new tasks that hold none
of its keys yet (a registry outlives the buffers it decided).

**The rules**, and why each is safe:

- ``min`` (watermarks, a source's progress, a versioned table's observed time): the smallest
  value of the feeding tasks. Every key the new task holds comes from one of them, and none of
  them had declared a time below its own watermark complete, so with the smallest no record
  that the key's old task would still have accepted is now late, and no join waits less than it
  would have. The cost is on the other side: a record later than its old task's watermark but
  not the new one's is accepted, where the old task would have called it late; for a job
  stopped at the end of its input and fed newer records after (the reshard's use), nothing
  falls between the two.
- ``max`` (sequences of a source's records, a registry's or a deduplicator's largest time): the
  largest value. A sequence at or below any old task's last one was already delivered (the job
  stopped at the end of its input), so a record re-sent with it is a duplicate; a horizon that
  never goes back refuses what any old task would have refused, the side on which nothing is
  joined or emitted twice.
- ``sum`` (counters): each old task's count goes to exactly one new task, ``j mod g``, so the
  job's total is unchanged.
- ``copy`` (ids registered or seen): every id goes to every new task that may receive the old
  task's keys; the id's own key is not in the entry, and a copy in a task that never sees the
  id again only waits for its GC. An id in two old tasks keeps the largest value (the latest
  time: it is kept longest).
- ``all`` (flags: a source idle, a table stream ended): kept only where every feeding task had
  it, the side on which nothing is released early.

>>> feeders(5, old_tasks=4, new_tasks=8), feeders(2, old_tasks=4, new_tasks=6)
([1], [0, 2])
>>> targets(3, "copy", old_tasks=8, new_tasks=3), targets(3, "sum", old_tasks=4, new_tasks=6)
([0, 1, 2], [1])
>>> merge("min", [b"\x02", b"\x01"], 2, 2), merge("sum", [(7).to_bytes(8, "big")] * 2, 2, 2)
(b'\x01', b'\x00\x00\x00\x00\x00\x00\x00\x0e')
>>> merge("all", [b"1"], contributors=1, expected=2) is None
True
"""

from __future__ import annotations

from collections.abc import Iterator
from math import gcd
from typing import Any

from samzapy.operators.key_encoding import decode_u64, encode_u64
from samzapy.operators.state_layout import ALL, COPY, MAX, MERGE_RULES, MIN, SUM
from samzapy.spark import SparkJobError

#: Routed rows of a reshard: a key's entry has its new ``partition`` and no ``rule``; a task's
#: own entry has ``partition`` -1, its ``rule`` and the ``old`` task it came from.
ROUTED_SCHEMA = "store STRING, partition INT, key BINARY, value BINARY, rule STRING, old INT"


def feeders(new: int, old_tasks: int, new_tasks: int) -> list[int]:
    """The old tasks whose keys may move to task ``new`` (module doc)."""
    g = gcd(old_tasks, new_tasks)
    return [j for j in range(old_tasks) if j % g == new % g]


def targets(old: int, rule: str, old_tasks: int, new_tasks: int) -> list[int]:
    """The new tasks that get a task-own entry of task ``old`` combined by ``rule``."""
    g = gcd(old_tasks, new_tasks)
    if rule == SUM:
        return [old % g]
    return [k for k in range(new_tasks) if k % g == old % g]


def merge(rule: str, values: list[bytes], contributors: int, expected: int) -> bytes | None:
    """The combined value of one task-own entry from ``contributors``.

    The contributors are among the ``expected`` feeding tasks. ``None``: the entry is dropped.
    """
    if rule == MIN:
        return min(values)
    if rule in (MAX, COPY):
        return max(values)
    if rule == SUM:
        return encode_u64(sum(decode_u64(v) for v in values))
    if rule == ALL:
        return max(values) if contributors == expected else None
    msg = f"unknown merge rule {rule!r}: expected one of {', '.join(MERGE_RULES)}"
    raise SparkJobError(msg)


def merged_entries(staged: Any, old_tasks: int, new_tasks: int) -> Any:
    """The task-own rows of ``staged`` (:data:`ROUTED_SCHEMA`) sent to their new tasks and combined.

    The result has the rows of :data:`~samzapy.spark.state_data.write.ENTRY_SCHEMA`.
    """
    from pyspark.sql import functions as F

    from samzapy.spark.state_data.write import ENTRY_SCHEMA

    own = staged.filter(F.col("rule").isNotNull())
    spread = own.mapInArrow(_Spread(old_tasks, new_tasks), ROUTED_SCHEMA)
    ordered = spread.repartition("store", "partition").sortWithinPartitions(
        "store", "partition", "key", "old"
    )
    return ordered.mapInArrow(_Merge(old_tasks, new_tasks), ENTRY_SCHEMA)


class _Spread:
    """Executor side: each task-own row once per new task that gets it."""

    def __init__(self, old_tasks: int, new_tasks: int) -> None:
        self.old_tasks, self.new_tasks = old_tasks, new_tasks

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            out: dict[str, list[Any]] = {name: [] for name in batch.schema.names}
            for row in batch.to_pylist():
                for partition in targets(row["old"], row["rule"], self.old_tasks, self.new_tasks):
                    for name in out:
                        out[name].append(partition if name == "partition" else row[name])
            yield pa.RecordBatch.from_pydict(out, schema=batch.schema)


class _Merge:
    """Executor side: rows sorted by (store, partition, key) -> one combined entry per key."""

    def __init__(self, old_tasks: int, new_tasks: int) -> None:
        self.old_tasks, self.new_tasks = old_tasks, new_tasks

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from samzapy.spark.state_data.write import entry_arrow_schema

        schema = entry_arrow_schema()
        group: list[dict[str, Any]] = []
        out: list[dict[str, Any]] = []
        for batch in batches:
            for row in batch.to_pylist():
                if group and (row["store"], row["partition"], row["key"]) != _id(group[0]):
                    out.extend(self._combined(group))
                    group = []
                group.append(row)
            if len(out) >= 10_000:
                yield pa.RecordBatch.from_pylist(out, schema=schema)
                out = []
        out.extend(self._combined(group))
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    def _combined(self, group: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not group:
            return []
        first = group[0]
        rules = {row["rule"] for row in group}
        if len(rules) > 1:
            msg = f"store '{first['store']}': the entry {first['key']!r} has the merge rules {sorted(rules)}"
            raise SparkJobError(msg)
        expected = len(feeders(first["partition"], self.old_tasks, self.new_tasks))
        contributors = len({row["old"] for row in group})
        value = merge(first["rule"], [row["value"] for row in group], contributors, expected)
        if value is None:
            return []
        return [{name: first[name] for name in ("store", "partition", "key")} | {"value": value}]


def _id(row: dict[str, Any]) -> tuple[str, int, bytes]:
    return row["store"], row["partition"], row["key"]

"""One RocksDB memory budget for all stores of a process (``job.rocksdb.memory.bytes``).

Many stores in one process, written and read, stay under the budget's block cache and
memtable figures as RocksDB itself reports them (``rocksdb.block-cache-usage``,
``rocksdb.cur-size-all-mem-tables``); the same load without a budget does not.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from samzapy.config import Config, ConfigError, parse_job_config
from samzapy.config.model import StoreConfig
from samzapy.container.task_builder import TaskBuilder
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.stores.factory import build_store
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.stores.rocksdb_options import (
    MIN_MEMTABLE_BYTES,
    MemoryBudget,
    memory_budget,
    use_memory_budget,
)

BUDGET = MemoryBudget(8 << 20)
STORES, TASKS = 6, 4  # 24 databases


@pytest.fixture(autouse=True)
def no_budget_after() -> Iterator[None]:
    yield
    use_memory_budget(None)


def _job(**extra: str) -> Config:
    return Config.from_dict({"job.name": "j", "task.class": "m:C", "task.inputs": "kafka.a", **extra})


def test_the_key_sets_the_budget_of_the_stores_a_task_builder_makes(tmp_path: Path) -> None:
    job = parse_job_config(_job(**{"job.rocksdb.memory.bytes": str(64 << 20)}))
    assert job.rocksdb_memory_bytes == 64 << 20
    TaskBuilder(job, base_dir=tmp_path, registry=MetricsRegistry())
    assert memory_budget() == MemoryBudget(64 << 20)
    TaskBuilder(parse_job_config(_job()), base_dir=tmp_path, registry=MetricsRegistry())
    assert memory_budget() is None  # unset: per-store memory again
    with pytest.raises(ConfigError, match="job.rocksdb.memory.bytes"):
        parse_job_config(_job(**{"job.rocksdb.memory.bytes": "0"}))


def _engines(base: Path) -> list[RocksDBStore]:
    """The RocksDB engines of six stores of four tasks, built as a job builds them."""
    engines = []
    for task in range(TASKS):
        for store in range(STORES):
            engine = build_store(
                StoreConfig(f"store{store}"),
                partition=task,
                base_dir=base,
                key_serde=None,
                msg_serde=None,
                changelog=None,
                metrics=MetricsGroup(f"store.store{store}.Partition {task}"),
            ).raw
            assert isinstance(engine, RocksDBStore)
            engines.append(engine)
    return engines


def _load(engines: list[RocksDBStore], rounds: int) -> tuple[int, int]:
    """Write ~1 MB into each database in store-sized batches and read some back after each
    round; the largest block cache usage and total memtable size RocksDB reported."""
    rng = random.Random(7)
    worst_cache = worst_memtables = 0
    for round_ in range(rounds):
        for engine in engines:
            for batch in range(5):
                base = (round_ * 5 + batch) * 100
                engine.put_all(
                    [(b"k%08d" % ((base + i) * 7919 % 100_000), rng.randbytes(200)) for i in range(100)]
                )
        for engine in engines:
            for i in range(0, 12_000, 37):
                engine.get(b"k%08d" % i)
        usage = [engine.memory_usage() for engine in engines]
        worst_cache = max(worst_cache, max(u["block-cache-usage"] for u in usage))
        worst_memtables = max(worst_memtables, sum(u["cur-size-all-mem-tables"] for u in usage))
    return worst_cache, worst_memtables


def test_many_stores_stay_under_the_budget_as_rocksdb_reports_it(tmp_path: Path) -> None:
    use_memory_budget(BUDGET)
    engines = _engines(tmp_path / "budget")
    try:
        cache, memtables = _load(engines, rounds=12)
    finally:
        for engine in engines:
            engine.close()
    assert cache <= BUDGET.total_bytes  # the one cache, memtables charged to it included
    assert memtables <= BUDGET.write_buffer_bytes
    assert memtables > 0


def test_without_a_budget_the_same_load_passes_those_figures(tmp_path: Path) -> None:
    engines = _engines(tmp_path / "no-budget")  # six caches of 100 MB, six memtable budgets of 32 MB
    try:
        _, memtables = _load(engines, rounds=12)
    finally:
        for engine in engines:
            engine.close()
    assert memtables > BUDGET.write_buffer_bytes


def test_memtables_grow_back_when_databases_close(tmp_path: Path) -> None:
    use_memory_budget(BUDGET)
    engines = _engines(tmp_path / "grow")
    for engine in engines[2:]:
        engine.close()
    options = sorted((tmp_path / "grow" / "store0" / "Partition_0").glob("OPTIONS-*"))[-1].read_text()
    # two databases open: each memtable flushed at a quarter of the memtables' share
    assert f"write_buffer_size={max(MIN_MEMTABLE_BYTES, BUDGET.write_buffer_bytes // 4)}" in options
    for engine in engines[:2]:
        engine.close()

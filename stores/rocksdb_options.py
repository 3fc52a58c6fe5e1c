"""Resolved RocksDB options of a store, and the memory its instances share in a process.

Two ways to bound RocksDB's memory:

- per store (the default): ``stores.<name>.container.cache.size.bytes`` and
  ``container.write.buffer.size.bytes`` give each store a block cache and a memtable budget
  that its instances (one per task) share; the process's bound is their sum over its stores;
- per process (``job.rocksdb.memory.bytes``, :class:`MemoryBudget`): one block cache for every
  store of the process, with the memtables charged to it through one write buffer manager,
  as Kafka Streams' bounded-memory ``RocksDBConfigSetter`` and Flink's managed memory do. The
  bound then holds whatever the number of stores and tasks.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    Options,
    Rdict,
    WriteBufferManager,
)

#: Share of a memtable's size its bloom filter may use.
MEMTABLE_BLOOM_RATIO = 0.02
#: (window of entries, deletes in that window, share of deletes in a file) that mark an SST
#: file for compaction (RocksDB's CompactOnDeletionCollector).
DELETION_COMPACTION = (10_000, 5_000, 0.5)


@dataclass(frozen=True)
class RocksDBOptions:
    """Resolved RocksDB settings of one store (``stores.<name>.*``).

    ``ttl_ms`` opens the database in RocksDB's TTL mode: entries older than the TTL are
    dropped at compaction (so a read may still see an expired entry until then), as in Samza.

    ``shared_by`` (the store's name) makes the sizes per container, as Samza's
    ``container.cache.size.bytes`` / ``container.write.buffer.size.bytes`` are: every instance
    of the store opened in this process (one per task) uses one block cache of
    ``cache_size_bytes`` and one memtable budget of ``write_buffer_size_bytes``, and index and
    filter blocks live in that cache, so RocksDB's memory is bounded by the configuration
    whatever the number of tasks or the size of the state. ``None`` gives the database caches
    of its own (tools, single stores). A process memory budget (:func:`use_memory_budget`,
    ``job.rocksdb.memory.bytes``) replaces those sizes for the stores of a job: one cache and
    one memtable budget for all of them.
    """

    cache_size_bytes: int = 100 * 1024 * 1024
    write_buffer_size_bytes: int = 32 * 1024 * 1024
    compression: str = "lz4"
    block_size_bytes: int = 4096
    ttl_ms: int | None = None
    shared_by: str | None = None

    def to_options(self) -> Options:
        """The ``rocksdict`` options, in raw bytes mode."""
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_write_buffer_size(self.write_buffer_size_bytes)
        options.set_compression_type(getattr(DBCompressionType, self.compression)())
        table = BlockBasedOptions()
        table.set_block_size(self.block_size_bytes)
        # A get of a key the store does not hold (a new window, a new user) would otherwise
        # read a block of every level-0 file and memtable: bloom filters (10 bits a key, as
        # Kafka Streams configures) answer most of those from memory.
        table.set_bloom_filter(10, False)
        options.set_memtable_whole_key_filtering(True)
        options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
        # Scans step over every tombstone until compaction drops it (the seed: "seekToFirst is
        # very slow if there are many deletes"): a file written with many deletes close
        # together is compacted soon, not when its level fills.
        options.add_compact_on_deletion_collector_factory(*DELETION_COMPACTION)
        budget = _PROCESS_BUDGET if self.shared_by is not None else None
        if budget is not None:
            memory = budget_memory(budget)
            # Opened at the size its share allows with one more database than now open; a
            # RocksDBStore then joins the budget, which resizes every open one (join_budget).
            opening = len(_MEMBERS.get(budget, ())) + 1
            options.set_write_buffer_size(min(self.write_buffer_size_bytes, _memtable_bytes(budget, opening)))
            table.set_block_cache(memory.cache)
            table.set_cache_index_and_filter_blocks(True)
            table.set_pin_l0_filter_and_index_blocks_in_cache(True)
            options.set_write_buffer_manager(memory.write_buffers)
        elif self.shared_by is None:
            table.set_block_cache(Cache(self.cache_size_bytes))
        else:
            memory = _container_memory(self.shared_by, self.cache_size_bytes, self.write_buffer_size_bytes)
            table.set_block_cache(memory.cache)
            # Index and filter blocks grow with the data: charged to the cache, they stay in
            # its bound; pinning level 0's keeps the hottest ones from being evicted.
            table.set_cache_index_and_filter_blocks(True)
            table.set_pin_l0_filter_and_index_blocks_in_cache(True)
            options.set_write_buffer_manager(memory.write_buffers)
        options.set_block_based_table_factory(table)
        return options

    def access_type(self) -> AccessType:
        """Read-write, or TTL mode (whole seconds, rounded up) when ``ttl_ms`` is set."""
        if self.ttl_ms is None:
            return AccessType.read_write()
        return AccessType.with_ttl(max(1, math.ceil(self.ttl_ms / 1000)))


@dataclass(frozen=True)
class ContainerMemory:
    """The block cache and memtable budget shared by one store's instances in this process."""

    cache: Cache
    write_buffers: WriteBufferManager


_CONTAINER_MEMORY: dict[tuple[str, int, int], ContainerMemory] = {}
_CONTAINER_MEMORY_LOCK = threading.Lock()


def _container_memory(store: str, cache_bytes: int, write_buffer_bytes: int) -> ContainerMemory:
    with _CONTAINER_MEMORY_LOCK:  # standby replicas open their stores on a thread of their own
        key = (store, cache_bytes, write_buffer_bytes)
        memory = _CONTAINER_MEMORY.get(key)
        if memory is None:
            # No stall: when memtables exceed the budget RocksDB flushes them early; writers
            # are not blocked (the run loop must not wait on a background flush).
            memory = ContainerMemory(Cache(cache_bytes), WriteBufferManager(write_buffer_bytes, False))
            _CONTAINER_MEMORY[key] = memory
        return memory


@dataclass(frozen=True)
class MemoryBudget:
    """One bound on the memory of every RocksDB store a process opens (``job.rocksdb.memory.bytes``).

    One LRU block cache of ``total_bytes`` holds the data, index and filter blocks of every
    store (the level-0 ones pinned), and one write buffer manager charges the memtables to that
    same cache and has a memtable flushed when they pass ``write_buffer_bytes``
    (``write_buffer_ratio`` of the total; half, as Flink's managed memory does by default), so
    the block cache and the memtables together stay within ``total_bytes``. No writer stalls:
    when memtables exceed their share RocksDB flushes them early (the run loop must not wait
    on a background flush).

    That manager alone does not bound many databases: it flushes only the database being
    written to, which then refills while the others keep theirs. So each open database's
    memtable is also sized to its part of the share: with N databases open (rounded up to a
    power of two, so that opening one more resizes the others only now and then), a memtable
    is flushed at ``write_buffer_bytes / (2 N)`` (never above the store's own
    ``container.write.buffer.size.bytes``, never below :data:`MIN_MEMTABLE_BYTES`): the active
    memtables take half the share, those being flushed the other half.

    Outside the bound: table readers' memory beyond their cached blocks, compaction buffers and
    the allocator's arenas (RocksDB's own caveats).
    """

    total_bytes: int
    write_buffer_ratio: float = 0.5

    def __post_init__(self) -> None:
        if self.total_bytes < 1:
            msg = f"RocksDB memory budget of {self.total_bytes} bytes: must be >= 1"
            raise ValueError(msg)
        if not 0 < self.write_buffer_ratio < 1:
            msg = f"RocksDB memory budget's write buffer ratio {self.write_buffer_ratio}: must be in (0, 1)"
            raise ValueError(msg)

    @property
    def write_buffer_bytes(self) -> int:
        """The memtables' share of the budget (charged to the block cache)."""
        return max(1, int(self.total_bytes * self.write_buffer_ratio))


#: The smallest memtable a budget gives a database (RocksDB allocates its arena in blocks of
#: an eighth of it).
MIN_MEMTABLE_BYTES = 64 * 1024

_PROCESS_BUDGET: MemoryBudget | None = None
_BUDGET_MEMORY: dict[MemoryBudget, ContainerMemory] = {}
#: The databases open under each budget: id -> (database, its store's largest memtable).
_MEMBERS: dict[MemoryBudget, dict[int, tuple[Rdict, int]]] = {}


def _memtable_bytes(budget: MemoryBudget, databases: int) -> int:
    """A memtable's size with ``databases`` open under ``budget`` (see :class:`MemoryBudget`)."""
    slots = 1 << max(databases - 1, 0).bit_length()  # the next power of two
    return max(MIN_MEMTABLE_BYTES, budget.write_buffer_bytes // (2 * slots))


def join_budget(db: Rdict, options: RocksDBOptions) -> MemoryBudget | None:
    """Count ``db`` (opened with ``options``) in the process budget, resizing memtables.

    Returns the budget it joined (``None``: it has no budget: per-store memory, or not a job
    store). Call :func:`leave_budget` before closing it.
    """
    budget = _PROCESS_BUDGET if options.shared_by is not None else None
    if budget is None:
        return None
    with _CONTAINER_MEMORY_LOCK:
        members = _MEMBERS.setdefault(budget, {})
        before = _memtable_bytes(budget, len(members))
        members[id(db)] = (db, options.write_buffer_size_bytes)
        changed = before != _memtable_bytes(budget, len(members))
        _resize(budget, members, list(members) if changed else [id(db)])
    return budget


def leave_budget(db: Rdict, budget: MemoryBudget | None) -> None:
    """Stop counting ``db`` in ``budget`` (from :func:`join_budget`); the others may grow back."""
    if budget is None:
        return
    with _CONTAINER_MEMORY_LOCK:
        members = _MEMBERS.get(budget, {})
        before = _memtable_bytes(budget, len(members))
        members.pop(id(db), None)
        if members and before != _memtable_bytes(budget, len(members)):
            _resize(budget, members, list(members))


def _resize(budget: MemoryBudget, members: dict[int, tuple[Rdict, int]], keys: list[int]) -> None:
    """Set the memtable size of the members ``keys`` names to the budget's part (RocksDB's SetOptions)."""
    size = _memtable_bytes(budget, len(members))
    for key in keys:
        db, cap = members[key]
        db.set_options({"write_buffer_size": str(min(cap, size))})


def use_memory_budget(budget: MemoryBudget | None) -> None:
    """Make ``budget`` the memory of every job store opened from now on in this process.

    ``None``: each store's own ``container.*`` sizes again. Job stores are those built by
    ``samzapy.stores.factory`` (``RocksDBOptions.shared_by`` set); tools and single databases
    keep caches of their own. Stores already open keep the memory they opened with. The
    container's task builder calls this with the job's ``job.rocksdb.memory.bytes``.
    """
    global _PROCESS_BUDGET
    with _CONTAINER_MEMORY_LOCK:
        _PROCESS_BUDGET = budget


def budget_of(total_bytes: int | None) -> MemoryBudget | None:
    """The budget ``job.rocksdb.memory.bytes`` asks for (``None``: unset, per-store memory)."""
    return None if total_bytes is None else MemoryBudget(total_bytes)


def memory_budget() -> MemoryBudget | None:
    """The budget stores opened now get (``None``: per-store memory)."""
    return _PROCESS_BUDGET


def budget_memory(budget: MemoryBudget) -> ContainerMemory:
    """The block cache and write buffer manager of ``budget`` in this process (made on first use)."""
    with _CONTAINER_MEMORY_LOCK:
        return _budget_memory_locked(budget)


def _budget_memory(budget: MemoryBudget) -> ContainerMemory:
    return budget_memory(budget)


def _budget_memory_locked(budget: MemoryBudget) -> ContainerMemory:
    memory = _BUDGET_MEMORY.get(budget)
    if memory is None:
        cache = Cache(budget.total_bytes)
        manager = WriteBufferManager.new_write_buffer_manager_with_cache(
            budget.write_buffer_bytes, False, cache
        )
        memory = _BUDGET_MEMORY[budget] = ContainerMemory(cache, manager)
    return memory

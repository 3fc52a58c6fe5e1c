"""Resolved RocksDB options of a store, and the memory one store's instances share in a process.

The shared memory is set by ``stores.<name>.container.cache.size.bytes`` and
``container.write.buffer.size.bytes``.
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
    of its own (tools, single stores).
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
        if self.shared_by is None:
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

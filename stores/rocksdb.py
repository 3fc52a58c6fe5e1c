"""The RocksDB engine: raw bytes in, raw bytes out, through ``rocksdict``.

Opening handles the two ways a directory can refuse to open: another live process holds its
``LOCK`` (retry with backoff up to a deadline, then :class:`StoreLockedError`; the ``LOCK`` file
is never deleted — RocksDB's lock is an ``flock`` that dies with its process, so a stale file
from a killed process does not block), or its files are damaged (:class:`StoreCorruptError`,
which the caller answers by wiping the directory and restoring from the changelog).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    Cache,
    Checkpoint,
    DBCompressionType,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteBufferManager,
)

from samzapy.errors import StoreError, StoreLockedError
from samzapy.stores.base import Entry, KeyValueIterator, KeyValueStore

log = logging.getLogger(__name__)

#: How long to wait for another process to release a store's lock before giving up.
DEFAULT_LOCK_TIMEOUT_S = 30.0
#: Files RocksDB never modifies once written: safe to hard-link between directories.
_IMMUTABLE_SUFFIXES = (".sst", ".blob")


class StoreCorruptError(StoreError):
    """A store directory exists but RocksDB cannot open it (damaged or foreign files)."""


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


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "IO error" in text and ("LOCK" in text or "lock" in text)


def open_rdict(path: Path, options: RocksDBOptions, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> Rdict:
    """Open (creating if missing) the database at ``path``, waiting for a lock held elsewhere.

    Raises:
        StoreLockedError: another live process still holds the lock after ``lock_timeout_s``.
        StoreCorruptError: the directory does not open for any other reason.
    """
    path.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + lock_timeout_s
    delay = 0.05
    while True:
        try:
            return Rdict(str(path), options=options.to_options(), access_type=options.access_type())
        except Exception as exc:  # rocksdict raises plain Exception with RocksDB's status text
            if not _is_lock_error(exc):
                msg = f"RocksDB store at '{path}' does not open: {exc}"
                raise StoreCorruptError(msg) from exc
            if time.monotonic() >= deadline:
                msg = (
                    f"RocksDB store at '{path}' is locked by another live process (still after "
                    f"{lock_timeout_s:g}s): {exc}. Stop the other owner of this task, or point "
                    "job.logged.store.base.dir elsewhere"
                )
                raise StoreLockedError(msg) from exc
            log.info("store %s is locked by another process, retrying in %.2fs", path, delay)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def copy_db_dir(source: Path, target: Path) -> None:
    """Copy a RocksDB checkpoint into ``target`` (which must not exist): immutable files are
    hard-linked (cheap, as RocksDB's own checkpoints), the mutable ones copied."""
    target.mkdir(parents=True)
    for entry in source.iterdir():
        if not entry.is_file() or entry.name == "OFFSET":
            continue
        dest = target / entry.name
        if entry.name.endswith(_IMMUTABLE_SUFFIXES):
            try:
                os.link(entry, dest)
                continue
            except OSError:
                pass  # another filesystem: fall back to a copy
        shutil.copy2(entry, dest)


class RocksDBStore(KeyValueStore[bytes, bytes]):
    """A RocksDB database in one directory, bytes keys and values, sorted by key bytes.

    Corner cases: ``put(k, None)`` deletes; iterators read a consistent view (RocksDB's
    implicit snapshot) and must be closed (use ``with``). A directory that does not open is
    wiped and recreated empty at construction (the log says why): the changelog restore
    refills it. Not thread-safe; one task owns it.
    """

    def __init__(
        self,
        path: Path,
        options: RocksDBOptions | None = None,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self.path = path
        self.options = options or RocksDBOptions()
        self.lock_timeout_s = lock_timeout_s
        self._db = self._open_or_wipe()

    def _open_or_wipe(self) -> Rdict:
        try:
            return open_rdict(self.path, self.options, self.lock_timeout_s)
        except StoreCorruptError as exc:
            log.warning("%s; wiping it, the changelog restore rebuilds it", exc)
            shutil.rmtree(self.path, ignore_errors=True)
            return open_rdict(self.path, self.options, self.lock_timeout_s)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` or ``None``."""
        return self._db.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` in order (RocksDB multi-get)."""
        return self._db.get(keys) if keys else []

    def put(self, key: bytes, value: bytes | None) -> None:
        """Write one entry; ``None`` deletes."""
        if value is None:
            self._db.delete(key)
        else:
            self._db.put(key, value)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write every entry in one atomic WriteBatch; ``None`` values delete."""
        batch = WriteBatch(raw_mode=True)
        for key, value in entries:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        if batch.len():
            self._db.write(batch)

    def delete(self, key: bytes) -> None:
        """Remove ``key``."""
        self._db.delete(key)

    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator[bytes, bytes]:
        """Entries with ``from_key <= key < to_key``."""
        read_options = ReadOptions()
        read_options.set_iterate_upper_bound(to_key)
        return self._iterate(from_key, read_options)

    def all(self) -> KeyValueIterator[bytes, bytes]:
        """Every entry in key order."""
        return self._iterate(None, None)

    def _iterate(
        self, from_key: bytes | None, read_options: ReadOptions | None
    ) -> KeyValueIterator[bytes, bytes]:
        it = self._db.iter(read_options) if read_options is not None else self._db.iter()
        if from_key is None:
            it.seek_to_first()
        else:
            it.seek(from_key)

        def entries() -> Iterator[Entry[bytes, bytes]]:
            # rocksdict's iterator does not own the upper bound set on its ReadOptions: keep
            # the options alive as long as the iterator, or the bound is read from freed memory
            # (ranges then stop early or run past their end, at random).
            _keep_alive = read_options  # noqa: F841
            while it.valid():
                yield Entry(it.key(), it.value())
                it.next()

        generator = entries()
        return KeyValueIterator(generator, generator.close)

    def flush(self) -> None:
        """Nothing buffered here: RocksDB's write-ahead log holds every write."""

    def checkpoint_to(self, target: Path) -> None:
        """Write a RocksDB checkpoint (hard links) of the current state into ``target``."""
        Checkpoint(self._db).create_checkpoint(str(target))

    def reset(self, source: Path | None = None) -> None:
        """Replace the live directory by a copy of the checkpoint ``source``, or empty it.

        Raises:
            StoreCorruptError: the copy does not open (the live directory is left empty).
        """
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        if source is not None:
            copy_db_dir(source, self.path)
        try:
            self._db = open_rdict(self.path, self.options, self.lock_timeout_s)
        except StoreCorruptError:
            shutil.rmtree(self.path, ignore_errors=True)
            self._db = open_rdict(self.path, self.options, self.lock_timeout_s)
            raise

    def close(self) -> None:
        """Close the database and release its lock."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RocksDBStore({str(self.path)!r})"

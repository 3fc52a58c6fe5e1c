"""The RocksDB engine: raw bytes in, raw bytes out, through ``rocksdict``.

Opening handles the ways a directory can refuse to open: another live process holds its
``LOCK`` (retry with backoff up to a deadline, then :class:`StoreLockedError`; the ``LOCK`` file
is never deleted — RocksDB's lock is an ``flock`` that dies with its process, so a stale file
from a killed process does not block); its files are damaged (:class:`StoreCorruptError`,
which the caller answers by wiping the directory and restoring from the changelog); or the
disk fails (full, read-only: :class:`~samzapy.errors.StorageFailure`, never answered by a
wipe).

Every other call into RocksDB turns RocksDB's errors into
:class:`~samzapy.errors.StorageFailure` naming the store, the file and the fix
(:mod:`samzapy.stores.failures`), and every scan checks the iterator's status at its end, so
a damaged block never reads as the end of the data.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any, cast

from rocksdict import Checkpoint, Rdict, ReadOptions, WriteBatch

from samzapy.errors import StorageFailure, StoreLockedError
from samzapy.stores.base import Entry, KeyValueIterator, RawStore, ReadView
from samzapy.stores.failures import (
    CORRUPTION,
    OTHER,
    is_rocksdb_error,
    iterator_failure,
    kind_of,
    status_text,
    storage_failure,
)
from samzapy.stores.rocksdb_options import (
    ContainerMemory,
    MemoryBudget,
    RocksDBOptions,
    join_budget,
    leave_budget,
)
from samzapy.stores.rocksdb_views import LiveRocksDBView

__all__ = [
    "DEFAULT_LOCK_TIMEOUT_S",
    "ContainerMemory",
    "RocksDBOptions",
    "RocksDBStore",
    "StoreCorruptError",
    "copy_db_dir",
    "open_rdict",
]

log = logging.getLogger(__name__)

#: How long to wait for another process to release a store's lock before giving up.
DEFAULT_LOCK_TIMEOUT_S = 30.0
#: Files RocksDB never modifies once written: safe to hard-link between directories.
_IMMUTABLE_SUFFIXES = (".sst", ".blob")
#: Read-ahead of :meth:`RocksDBStore.verify`'s sequential scan.
_VERIFY_READAHEAD = 4 << 20


class StoreCorruptError(StorageFailure):
    """A store directory exists but RocksDB cannot open or read it (damaged or foreign files)."""


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "IO error" in text and ("LOCK" in text or "lock" in text)


def open_rdict(path: Path, options: RocksDBOptions, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> Rdict:
    """Open (creating if missing) the database at ``path``, waiting for a lock held elsewhere.

    Raises:
        StoreLockedError: another live process still holds the lock after ``lock_timeout_s``.
        StoreCorruptError: the directory's files are damaged or not a RocksDB database.
        StorageFailure: the disk failed (full, read-only, IO error): wiping would not help.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_failure(exc, path, "creating the store's directory") from exc
    deadline = time.monotonic() + lock_timeout_s
    delay = 0.05
    while True:
        try:
            return Rdict(str(path), options=options.to_options(), access_type=options.access_type())
        except Exception as exc:  # rocksdict raises plain Exception with RocksDB's status text
            if not _is_lock_error(exc):
                raise _open_failure(exc, path) from exc
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


def _open_failure(exc: Exception, path: Path) -> StorageFailure:
    """A damaged directory (wipe and rebuild it) or a failing disk (do not)."""
    kind = kind_of(status_text(exc))
    if kind in (CORRUPTION, OTHER):
        msg = f"RocksDB store at '{path}' does not open: {status_text(exc)}"
        return StoreCorruptError(msg, store=path.parent.name, path=str(path))
    return storage_failure(exc, path, "opening the store")


def copy_db_dir(source: Path, target: Path) -> None:
    """Copy a RocksDB checkpoint into ``target`` (which must not exist).

    Immutable files are hard-linked (cheap, as RocksDB's own checkpoints), the mutable ones
    copied.
    """
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


class RocksDBStore(RawStore):
    """A RocksDB database in one directory, bytes keys and values, sorted by key bytes.

    Corner cases: ``put(k, None)`` deletes; iterators read a consistent view (RocksDB's
    implicit snapshot), must be closed (use ``with``) and raise ``StorageFailure`` rather than
    end early on a damaged block. A directory that does not open is wiped and recreated empty
    at construction (the log says why): the changelog restore refills it. Any RocksDB error
    raises :class:`~samzapy.errors.StorageFailure` naming the store, the file and the fix.
    Not thread-safe (one task owns it), except :meth:`read_view`.
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
        self._budget: MemoryBudget | None = None
        self._db: Rdict | None = self._open_or_wipe()

    def _open_or_wipe(self) -> Rdict:
        try:
            return self._opened(open_rdict(self.path, self.options, self.lock_timeout_s))
        except StoreCorruptError as exc:
            log.warning("%s; wiping it, the changelog restore rebuilds it", str(exc))
            shutil.rmtree(self.path, ignore_errors=True)
            return self._opened(open_rdict(self.path, self.options, self.lock_timeout_s))

    def _opened(self, db: Rdict) -> Rdict:
        """``db``, counted in the process's memory budget if there is one (``join_budget``)."""
        self._budget = join_budget(db, self.options)
        return db

    def _live(self) -> Rdict:
        """The open database (a bug to ask after :meth:`close`)."""
        db = self._db
        assert db is not None, f"{self!r} is closed"
        return db

    def _failure(self, exc: Exception, doing: str) -> StorageFailure:
        return storage_failure(exc, self.path, doing)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` or ``None``."""
        try:
            return self._db.get(key)  # type: ignore[union-attr]
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise self._failure(exc, "reading") from exc

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` in order (RocksDB multi-get)."""
        if not keys:
            return []
        try:
            # rocksdict's stub takes a list of any key type (invariant) and returns Any
            values = cast("list[bytes | None]", self._db.get(keys))  # type: ignore[union-attr, arg-type]
            return values
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise self._failure(exc, "reading") from exc

    def put(self, key: bytes, value: bytes | None) -> None:
        """Write one entry; ``None`` deletes."""
        try:
            if value is None:
                self._db.delete(key)  # type: ignore[union-attr]
            else:
                self._db.put(key, value)  # type: ignore[union-attr]
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise self._failure(exc, "writing") from exc

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write every entry in one atomic WriteBatch; ``None`` values delete."""
        batch = WriteBatch(raw_mode=True)
        for key, value in entries:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        if batch.len():
            self._write(batch)

    def _write(self, batch: WriteBatch) -> None:
        """Apply ``batch`` atomically; a RocksDB failure is this store's ``writing`` error."""
        try:
            self._db.write(batch)  # type: ignore[union-attr]
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise self._failure(exc, "writing") from exc

    def delete(self, key: bytes) -> None:
        """Remove ``key``."""
        self.put(key, None)

    def delete_scanned(self, keys: list[bytes], from_key: bytes, to_key: bytes) -> None:
        """Remove ``[from_key, to_key)``, whose entries are ``keys``, with one range tombstone.

        A point tombstone per key stays in every file until compaction meets its key's value,
        and files full of them trigger compactions of their own (``DELETION_COMPACTION``); a
        range tombstone is one entry, and scans skip the range it covers in one step. A store
        in TTL mode deletes the keys one by one (its compaction filter is not meant for ranges).
        """
        if self.options.ttl_ms is not None or not keys:
            self.delete_all(keys)
            return
        batch = WriteBatch(raw_mode=True)
        batch.delete_range(from_key, to_key)
        self._write(batch)

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
        db = self._db
        assert db is not None, f"{self!r} is closed"
        it = db.iter(read_options) if read_options is not None else db.iter()
        if from_key is None:
            it.seek_to_first()
        else:
            it.seek(from_key)
        generator = _entries([it], self.path, read_options)
        return KeyValueIterator(generator, generator.close)

    def flush(self) -> None:
        """Nothing buffered here: RocksDB's write-ahead log holds every write."""

    def read_view(self) -> ReadView:
        """A read-only view another thread may read while the task writes (the query service)."""
        return LiveRocksDBView(lambda: self._db, self.path)

    def verify(self) -> int:
        """Read every entry with checksums verified (a damaged block fails, not ends, the scan).

        Returns the number of entries.

        The walk only steps the iterator (no key or value reaches Python), which still loads
        and checks every data block: about three times faster than a scan through
        :meth:`all`.

        Raises:
            StoreCorruptError: a block or file is damaged (named in the message).
        """
        db = self._db
        assert db is not None, f"{self!r} is closed"
        options = ReadOptions()
        options.set_verify_checksums(True)
        options.fill_cache(False)  # type: ignore[call-arg]  # the binding takes it; its stub omits it
        # (a one-off scan must not evict the hot blocks)
        options.set_readahead_size(_VERIFY_READAHEAD)
        it = db.iter(options)
        it.seek_to_first()
        valid, step, entries = it.valid, it.next, 0
        while valid():
            step()
            entries += 1
        failure = iterator_failure(it, self.path, entries)
        del it, valid, step  # not kept alive by the traceback: they hold the database open
        if failure is not None:
            raise StoreCorruptError(str(failure), store=failure.store, path=failure.path)
        return entries

    def checkpoint_to(self, target: Path) -> None:
        """Write a RocksDB checkpoint (hard links) of the current state into ``target``."""
        try:
            Checkpoint(self._live()).create_checkpoint(str(target))
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise self._failure(exc, f"taking a local checkpoint into {target}") from exc

    def reset(self, source: Path | None = None) -> None:
        """Replace the live directory by a copy of the checkpoint ``source``, or empty it.

        The live database is discarded: an error closing it (a damaged or full store) is
        logged, never raised, since its files are deleted next.

        Raises:
            StoreCorruptError: the copy does not open (the live directory is left empty).
            StorageFailure: the copy failed (a full disk).
        """
        if source is None and self._holds_nothing():
            return  # already empty: a fresh database would cost ~10 ms of file creation and fsyncs
        self._close_discarded()
        shutil.rmtree(self.path, ignore_errors=True)
        if source is not None:
            try:
                copy_db_dir(source, self.path)
            except OSError as exc:
                raise self._failure(exc, f"copying the local checkpoint {source}") from exc
        try:
            self._db = self._opened(open_rdict(self.path, self.options, self.lock_timeout_s))
        except StoreCorruptError:
            shutil.rmtree(self.path, ignore_errors=True)
            self._db = self._opened(open_rdict(self.path, self.options, self.lock_timeout_s))
            raise

    def memory_usage(self) -> dict[str, int]:
        """What RocksDB reports of this database's memory, in bytes.

        ``block-cache-usage`` (of the cache it uses, which stores may share),
        ``cur-size-all-mem-tables`` (its memtables, active and being flushed),
        ``size-all-mem-tables`` (those and the flushed ones still referenced) and
        ``estimate-table-readers-mem`` (index and filter blocks held outside the cache).
        """
        db = self._live()
        names = (
            "block-cache-usage",
            "cur-size-all-mem-tables",
            "size-all-mem-tables",
            "estimate-table-readers-mem",
        )
        return {name: int(db.property_int_value(f"rocksdb.{name}") or 0) for name in names}

    def _holds_nothing(self) -> bool:
        """Whether nothing was ever written to the open database: no table file, empty logs.

        A store opened on a new or wiped directory (every column family included, unlike a
        look at the default one's entries). Any doubt counts as "written": the caller then
        rebuilds the directory.
        """
        if self._db is None:
            return False
        try:
            for entry in os.scandir(self.path):
                if entry.name.endswith(".sst") or (entry.name.endswith(".log") and entry.stat().st_size):
                    return False
        except OSError:
            return False
        return True

    def _close_discarded(self) -> None:
        try:
            self.close()
        except StorageFailure as exc:
            self._db = None
            log.warning(
                "closing %s before deleting it failed (ignored, it is rebuilt): %s", self.path, str(exc)
            )

    def close(self) -> None:
        """Close the database and release its lock.

        Raises:
            StorageFailure: RocksDB failed writing its last state (the lock is released anyway).
        """
        db, self._db = self._db, None
        if db is None:
            return
        leave_budget(db, self._budget)
        failure = None
        try:
            db.close()
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            failure = self._failure(exc, "closing")
        # Drop the database before raising: the traceback would keep it (and its lock) alive.
        del db
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        return f"RocksDBStore({str(self.path)!r})"


def _entries(
    holder: list[Any], db_dir: Path, read_options: ReadOptions | None
) -> Generator[Entry[bytes, bytes], None, None]:
    """The entries of the iterator in ``holder``, until it ends.

    The entries of the iterator in ``holder`` (taken out, so that this frame owns the only
    reference) until it ends; a walk that ended on an error raises StorageFailure.
    """
    it = holder.pop()
    # rocksdict's iterator does not own the upper bound set on its ReadOptions: keep the
    # options alive as long as the iterator, or the bound is read from freed memory (ranges
    # then stop early or run past their end, at random).
    _keep_alive = read_options  # noqa: F841
    read = 0
    new = tuple.__new__  # half the cost of Entry(...), whose generated __new__ is a Python call
    while it.valid():
        yield new(Entry, (it.key(), it.value()))
        read += 1
        it.next()
    failure = iterator_failure(it, db_dir, read)  # an error ends the walk as if the keys had ended
    del it  # not kept alive by the traceback: it holds the database (and its lock) open
    if failure is not None:
        raise failure

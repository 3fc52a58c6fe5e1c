"""Reading a store on disk — a live job's included — without taking its lock.

Every database is opened as a RocksDB *secondary instance* (``AccessType.secondary`` with a
private temporary directory) and caught up with the primary: it sees what the job wrote, the
memtable included (RocksDB replays the primary's write-ahead log), and never takes or waits
for the primary's ``LOCK``. What a secondary cannot see is what never reached RocksDB: values
still in the job's object cache (``stores.<s>.object.cache.size``), written down at commit or
when the dirty batch (``write.batch.size``) fills.

Where the database is (``db_path``), in order:

1. ``db_path`` holds a ``CURRENT`` file: it is the database (``.../<store>/Partition_<N>``, the
   form Samza's tool takes);
2. ``db_path/<db_name>`` is a directory: ``db_path`` is the job's base directory
   (``job.logged.store.base.dir``), the partitions are ``<db_name>/Partition_<N>``;
3. ``db_path`` holds ``Partition_<N>`` directories: it is the store's directory.

Every partition found is read unless ``partition`` picks one.

A damaged store is never read as if it were whole (:mod:`samzapy.ondisk.damage`): a missing
CURRENT or MANIFEST is said plainly, a store no live process has open is probed read-only
first (RocksDB then checks every file it lists), and every walk ends by asking the iterator
whether it stopped on an error. Damage raises :class:`~samzapy.errors.StorageFailure`.

Used by the command-line tools (``read-rocksdb-tool``, ``state-storage-tool verify``) and by
state as data (``read_state(source="disk")``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from rocksdict import AccessType, Options, Rdict, ReadOptions

from samzapy.errors import BadArgumentError
from samzapy.ondisk.damage import (
    NotAStoreError,
    check_iterator,
    check_manifest,
    failed_read,
    looks_like_db,
    probe,
)
from samzapy.stores.paths import partition_dirs, partition_of
from samzapy.stores.rocksdb_views import TTL_SUFFIX


@dataclass(frozen=True)
class DbLocation:
    """One database directory and the partition (task) it belongs to (``None``: unknown)."""

    partition: int | None
    path: Path


def _partition_dirs(root: Path) -> list[DbLocation]:
    return [DbLocation(partition_of(p), p) for p in partition_dirs(root)]


def locate(db_path: Path, db_name: str, partition: int | None = None) -> list[DbLocation]:
    """The database directories of store ``db_name`` under ``db_path`` (module doc).

    Raises:
        BadArgumentError: nothing there is a RocksDB store, or ``partition`` is not among them.
        StorageFailure: a store's directory has lost its CURRENT file.
    """
    if not db_path.is_dir():
        msg = f"--db-path '{db_path}' is not a directory"
        raise BadArgumentError(msg)
    if looks_like_db(db_path):
        found = [DbLocation(partition_of(db_path), db_path)]
    elif (db_path / db_name).is_dir():
        found = _partition_dirs(db_path / db_name)
    else:
        found = _partition_dirs(db_path)
    if not found:
        msg = (
            f"'{db_path}' is not a RocksDB store: no CURRENT file in it, and no "
            f"{db_name}/Partition_<N> or Partition_<N> directories under it"
        )
        raise BadArgumentError(msg)
    if partition is not None:
        picked = [loc for loc in found if loc.partition == partition or loc.partition is None]
        if not picked:
            have = ", ".join(str(loc.partition) for loc in found)
            msg = f"store '{db_name}' has no partition {partition} under '{db_path}' (found: {have})"
            raise BadArgumentError(msg)
        found = picked
    for loc in found:
        if not (loc.path / "CURRENT").is_file():
            if looks_like_db(loc.path):
                check_manifest(loc.path, db_name)  # raises: says the CURRENT file is missing
            msg = f"'{loc.path}' is not a RocksDB store: it has no CURRENT file"
            raise BadArgumentError(msg)
    return found


class SecondaryDb:
    """One database opened as a secondary instance (raw bytes), caught up with its primary.

    ``ttl``: the store was written in RocksDB's TTL mode; the write time RocksDB appends to
    each value is cut off. ``store``: its name, for error messages. Close it (or use
    ``with``): that removes its temporary directory.

    Raises:
        BadArgumentError: the directory is not a RocksDB store.
        StorageFailure: it is one, but damaged (module doc).
    """

    def __init__(self, location: DbLocation, ttl: bool = False, store: str | None = None) -> None:
        self.location = location
        self.ttl = ttl
        self.store = store
        path = location.path
        try:
            check_manifest(path, store)
        except NotAStoreError as exc:
            msg = f"'{path}' is not a readable RocksDB store: {exc}"
            raise BadArgumentError(msg) from None
        probe(path, store)
        self._scratch = tempfile.mkdtemp(prefix="samzapy-secondary-")
        options = Options(raw_mode=True)
        options.set_max_open_files(-1)  # RocksDB's requirement for a secondary instance
        try:
            self._db = Rdict(str(path), options=options, access_type=AccessType.secondary(self._scratch))
            self._db.try_catch_up_with_primary()
        except Exception as exc:  # rocksdict raises plain Exception with RocksDB's status text
            shutil.rmtree(self._scratch, ignore_errors=True)
            msg = f"'{path}' is not a readable RocksDB store: {exc}"
            raise BadArgumentError(msg) from None

    @property
    def partition(self) -> int | None:
        """The partition (task) of this database."""
        return self.location.partition

    def _value(self, raw: bytes | None) -> bytes | None:
        if raw is None or not self.ttl:
            return raw
        return raw[:-TTL_SUFFIX]

    def catch_up(self) -> None:
        """See what the primary wrote since the open (or the last catch-up)."""
        self._db.try_catch_up_with_primary()

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """The stored values of ``keys`` (``None``: absent).

        Raises:
            StorageFailure: RocksDB could not read them (a damaged file).
        """
        if not keys:
            return []
        try:
            # rocksdict's stub takes a list of any key type (invariant) and returns Any
            found = cast("list[bytes | None]", self._db.get(keys))  # type: ignore[arg-type]
        except Exception as exc:  # rocksdict raises plain Exception with RocksDB's status text
            raise failed_read(exc, self.location.path, self.store) from None
        return [self._value(v) for v in found]

    def entries(
        self, from_key: bytes | None = None, to_key: bytes | None = None, prefix: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key < to_key`` whose key starts with ``prefix``, in order.

        Raises:
            StorageFailure: the walk stopped on a damaged block or file, not at the end.
        """
        options = ReadOptions()
        if to_key is not None:
            options.set_iterate_upper_bound(to_key)
        it = self._db.iter(options)
        start = max(k for k in (from_key, prefix) if k is not None) if (from_key or prefix) else None
        if start is None:
            it.seek_to_first()
        else:
            it.seek(start)
        read = 0
        while it.valid():
            key = it.key()
            if prefix is not None and not key.startswith(prefix):
                return
            yield key, cast(bytes, self._value(it.value()))  # an entry read back has a value
            read += 1
            it.next()
        check_iterator(it, self.location.path, read, self.store)

    def property_int(self, name: str) -> int | None:
        """A RocksDB integer property (``rocksdb.estimate-num-keys``, ...)."""
        return self._db.property_int_value(name)

    def close(self) -> None:
        """Close the instance and remove its temporary directory."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None  # type: ignore[assignment]  # closed: a second close() does nothing
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> SecondaryDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

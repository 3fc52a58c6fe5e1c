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

A damaged store is never read as if it were whole (:mod:`samzapy.tools.rocksdb_files`): a
missing CURRENT or MANIFEST is said plainly, a store no live process has open is probed
read-only first (RocksDB then checks every file it lists), and every walk ends by asking the
iterator whether it stopped on an error. Damage raises
:class:`~samzapy.errors.StorageFailure`.
"""

from __future__ import annotations

import heapq
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import AccessType, Options, Rdict, ReadOptions

from samzapy.config import Config, JobConfig, StoreConfig, load_config, parse_job_config
from samzapy.errors import ConfigError
from samzapy.serdes import SerdeResolver
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.tools.common import BadInputError, JobSetup
from samzapy.tools.keys import KeyCodec
from samzapy.tools.locks import is_locked
from samzapy.tools.rocksdb_files import (
    NotAStoreError,
    check_iterator,
    check_manifest,
    failed_read,
    looks_like_db,
    probe,
)

_PARTITION_DIR = re.compile(r"^Partition_(\d+)$")
#: RocksDB's TTL mode appends a 4-byte write time to every value.
_TTL_SUFFIX = 4


@dataclass(frozen=True)
class DbLocation:
    """One database directory and the partition (task) it belongs to (``None``: unknown)."""

    partition: int | None
    path: Path


def _partition_of(path: Path) -> int | None:
    match = _PARTITION_DIR.match(path.name)
    return int(match.group(1)) if match else None


def _partition_dirs(root: Path) -> list[DbLocation]:
    found = [
        DbLocation(_partition_of(p), p) for p in root.iterdir() if p.is_dir() and _partition_of(p) is not None
    ]
    return sorted(found, key=lambda loc: loc.partition or 0)


def locate(db_path: Path, db_name: str, partition: int | None = None) -> list[DbLocation]:
    """The database directories of store ``db_name`` under ``db_path`` (module doc).

    Raises:
        BadInputError: nothing there is a RocksDB store, or ``partition`` is not among them.
        StorageFailure: a store's directory has lost its CURRENT file.
    """
    if not db_path.is_dir():
        msg = f"--db-path '{db_path}' is not a directory"
        raise BadInputError(msg)
    if looks_like_db(db_path):
        found = [DbLocation(_partition_of(db_path), db_path)]
    elif (db_path / db_name).is_dir():
        found = _partition_dirs(db_path / db_name)
    else:
        found = _partition_dirs(db_path)
    if not found:
        msg = (
            f"'{db_path}' is not a RocksDB store: no CURRENT file in it, and no "
            f"{db_name}/Partition_<N> or Partition_<N> directories under it"
        )
        raise BadInputError(msg)
    if partition is not None:
        picked = [loc for loc in found if loc.partition == partition or loc.partition is None]
        if not picked:
            have = ", ".join(str(loc.partition) for loc in found)
            msg = f"store '{db_name}' has no partition {partition} under '{db_path}' (found: {have})"
            raise BadInputError(msg)
        found = picked
    for loc in found:
        if not (loc.path / "CURRENT").is_file():
            if looks_like_db(loc.path):
                check_manifest(loc.path, db_name)  # raises: says the CURRENT file is missing
            msg = f"'{loc.path}' is not a RocksDB store: it has no CURRENT file"
            raise BadInputError(msg)
    return found


class SecondaryDb:
    """One database opened as a secondary instance (raw bytes), caught up with its primary.

    ``ttl``: the store was written in RocksDB's TTL mode; the write time RocksDB appends to
    each value is cut off. ``store``: its name, for error messages. Close it (or use
    ``with``): that removes its temporary directory.

    Raises:
        BadInputError: the directory is not a RocksDB store.
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
            raise BadInputError(msg) from None
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
            raise BadInputError(msg) from None

    @property
    def partition(self) -> int | None:
        """The partition (task) of this database."""
        return self.location.partition

    def _value(self, raw: bytes | None) -> bytes | None:
        if raw is None or not self.ttl:
            return raw
        return raw[:-_TTL_SUFFIX]

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
            found = self._db.get(keys)
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
            yield key, self._value(it.value())
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
            self._db = None
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> SecondaryDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tagged(
    db: SecondaryDb, from_key: bytes | None, to_key: bytes | None, prefix: bytes | None
) -> Iterator[tuple[bytes, int | None, bytes]]:
    """``db``'s entries as (key, partition, value): a function, so that each stream keeps its
    own database (a generator expression in a loop would read the loop variable late, and
    label every entry with the last partition)."""
    partition = db.partition
    for key, value in db.entries(from_key, to_key, prefix):
        yield key, partition, value


@dataclass(frozen=True)
class DbStats:
    """What ``read-rocksdb-tool stats`` shows of one database."""

    partition: int | None
    path: Path
    estimated_keys: int | None
    size_bytes: int
    sst_files: int
    sst_bytes: int
    memtable_bytes: int | None
    changelog_offset: int | None  # from the newest local checkpoint's OFFSET file
    local_checkpoints: int
    live: bool | None  # open read-write by a live process (a running job)


def _setup_of(config: Config | JobConfig | JobSetup | str | Path) -> JobConfig:
    if isinstance(config, JobSetup):
        return config.job
    if isinstance(config, JobConfig):
        return config
    try:
        loaded = config if isinstance(config, Config) else load_config(config)
        return parse_job_config(loaded)
    except ConfigError as exc:
        raise BadInputError(str(exc)) from exc


def store_of(job: JobConfig, db_name: str | None) -> StoreConfig:
    """The store called ``db_name``; the only store when ``db_name`` is ``None``.

    Raises:
        BadInputError: no such store, no store at all, or several and no name.
    """
    stores = job.stores
    if db_name is None:
        if len(stores) == 1:
            return next(iter(stores.values()))
        if not stores:
            msg = "the config defines no stores (no stores.<name>.factory key)"
            raise BadInputError(msg)
        msg = f"the config has {len(stores)} stores ({', '.join(stores)}): name one with --db-name"
        raise BadInputError(msg)
    if db_name not in stores:
        known = ", ".join(stores) or "none"
        msg = f"store '{db_name}' is not in the config: its stores are {known}"
        raise BadInputError(msg)
    return stores[db_name]


class RocksDbKeyValueReader:
    """Read a job's store with deserialised keys and values (Samza's ``RocksDbKeyValueReader``).

    Example::

        with RocksDbKeyValueReader("counts", "/var/lib/job/state", "job.properties") as reader:
            reader.get("ann")            # -> 42, or None when absent
            list(reader.scan(prefix="a", limit=10))

    Args:
        db_name: the store (``None``: the config's only store).
        db_path: the job's base directory, the store's directory or one ``Partition_<N>``
            (module doc).
        config: the job's config: a ``.properties`` path, a :class:`Config` or a :class:`JobConfig`.
        partition: read only this partition (default: every partition found; a key is
            looked up in each).

    Opens secondary instances, so it works on a running job's store without disturbing it;
    :meth:`catch_up` sees later writes. Not thread-safe.
    """

    def __init__(
        self,
        db_name: str | None,
        db_path: str | Path,
        config: Config | JobConfig | JobSetup | str | Path,
        partition: int | None = None,
    ) -> None:
        self.job = _setup_of(config)
        self.store = store_of(self.job, db_name)
        key_serde, msg_serde = SerdeResolver(self.job).for_store(self.store)
        self.codec = KeyCodec(self.store.name, key_serde, msg_serde, self.store.key_serde)
        self.locations = locate(Path(db_path), self.store.name, partition)
        self.dbs: list[SecondaryDb] = []
        try:
            ttl = self.store.ttl_ms is not None
            for location in self.locations:
                self.dbs.append(SecondaryDb(location, ttl=ttl, store=self.store.name))
        except BaseException:
            self.close()
            raise

    # -- bytes level --------------------------------------------------------------------------

    def find_raw(self, key: bytes) -> tuple[int | None, bytes | None]:
        """(partition, stored value) of the stored key ``key``; ``(None, None)`` when absent."""
        for db in self.dbs:
            (value,) = db.get_many([key])
            if value is not None:
                return db.partition, value
        return None, None

    def scan_raw(
        self,
        from_key: bytes | None = None,
        to_key: bytes | None = None,
        prefix: bytes | None = None,
        limit: int | None = None,
    ) -> Iterator[tuple[int | None, bytes, bytes]]:
        """(partition, key, value) bytes in key order over every partition read."""
        streams = [_tagged(db, from_key, to_key, prefix) for db in self.dbs]
        for n, (key, partition, value) in enumerate(heapq.merge(*streams, key=lambda e: e[0])):
            if limit is not None and n >= limit:
                return
            yield partition, key, value

    # -- objects ------------------------------------------------------------------------------

    def get(self, key: Any) -> Any:
        """The deserialised value of ``key`` (a key object, serialised with the store's serde)."""
        return self.find(key)[1]

    def find(self, key: Any, kind: str = "") -> tuple[int | None, Any]:
        """(partition, value) of ``key``; ``(None, None)`` when absent. ``kind="hex"``: raw key bytes."""
        partition, raw = self.find_raw(self.codec.encode_key(kind, key))
        return partition, self.codec.decode_value(raw)

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        """The present values of ``keys``."""
        found = {}
        for key in keys:
            value = self.get(key)
            if value is not None:
                found[key] = value
        return found

    def scan(
        self,
        from_key: Any = None,
        to_key: Any = None,
        prefix: Any = None,
        limit: int | None = None,
        kind: str = "",
    ) -> Iterator[tuple[Any, Any]]:
        """(key, value) objects in serialised-key order; bounds are key objects (``kind="hex"``:
        bytes). ``from_key`` inclusive, ``to_key`` exclusive, ``prefix`` on the serialised bytes."""
        for _, key, value in self.entries(from_key, to_key, prefix, limit, kind):
            yield key, value

    def entries(
        self,
        from_key: Any = None,
        to_key: Any = None,
        prefix: Any = None,
        limit: int | None = None,
        kind: str = "",
    ) -> Iterator[tuple[int | None, Any, Any]]:
        """As :meth:`scan`, with the partition of each entry: (partition, key, value)."""
        for partition, key, value in self.scan_raw(*self._bounds(from_key, to_key, prefix, kind), limit):
            yield partition, self.codec.decode_key(key), self.codec.decode_value(value)

    def count(self, from_key: Any = None, to_key: Any = None, prefix: Any = None, kind: str = "") -> int:
        """The exact number of keys in the range (every key is visited)."""
        return sum(1 for _ in self.scan_raw(*self._bounds(from_key, to_key, prefix, kind)))

    def _bounds(self, from_key: Any, to_key: Any, prefix: Any, kind: str) -> tuple[bytes | None, ...]:
        def enc(key: Any) -> bytes | None:
            return None if key is None else self.codec.encode_key(kind, key)

        return enc(from_key), enc(to_key), enc(prefix)

    def stats(self) -> list[DbStats]:
        """Size, files, key estimate and changelog offset of every partition read."""
        return [self._stats(db) for db in self.dbs]

    def _stats(self, db: SecondaryDb) -> DbStats:
        files = [p for p in db.location.path.iterdir() if p.is_file()]
        ssts = [p for p in files if p.suffix == ".sst"]
        offset, checkpoints = None, 0
        if self.store.changelog is not None and db.partition is not None:
            found = LocalCheckpoints(
                db.location.path, self.store.changelog.stream, db.partition
            ).newest_first()
            offset, checkpoints = (found[0].offset if found else None), len(found)
        return DbStats(
            partition=db.partition,
            path=db.location.path,
            estimated_keys=db.property_int("rocksdb.estimate-num-keys"),
            size_bytes=sum(p.stat().st_size for p in files),
            sst_files=len(ssts),
            sst_bytes=sum(p.stat().st_size for p in ssts),
            memtable_bytes=db.property_int("rocksdb.cur-size-all-mem-tables"),
            changelog_offset=offset,
            local_checkpoints=checkpoints,
            live=is_locked(db.location.path),
        )

    def catch_up(self) -> None:
        """See what the job wrote since the reader was opened."""
        for db in self.dbs:
            db.catch_up()

    def close(self) -> None:
        """Close every database."""
        for db in self.dbs:
            db.close()
        self.dbs = []

    def __enter__(self) -> RocksDbKeyValueReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["DbLocation", "DbStats", "RocksDbKeyValueReader", "SecondaryDb", "locate", "store_of"]

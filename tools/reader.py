"""``read-rocksdb-tool``'s reading: a store's databases on disk, a live job's included.

They are read without taking their lock, merged across partitions in key order, keys and values
shown with the store's serdes. The databases are found and opened by
:mod:`samzapy.ondisk.secondary` (secondary instances; damage checked by
:mod:`samzapy.ondisk.damage`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samzapy.config import Config, JobConfig, StoreConfig, load_config, parse_job_config
from samzapy.errors import ConfigError
from samzapy.ondisk.locks import is_locked
from samzapy.ondisk.secondary import DbLocation, SecondaryDb, locate
from samzapy.serdes import SerdeResolver
from samzapy.store_codec import StoreCodec
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.tools.common import BadInputError, JobSetup


def _tagged(
    db: SecondaryDb, from_key: bytes | None, to_key: bytes | None, prefix: bytes | None
) -> Iterator[tuple[bytes, int | None, bytes]]:
    """``db``'s entries as (key, partition, value).

    A function, so that each stream keeps its own database (a generator expression in a loop
    would read the loop variable late, and label every entry with the last partition).
    """
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
        self.codec = StoreCodec(self.store.name, key_serde, msg_serde, self.store.key_serde)
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
        """(key, value) objects in serialised-key order; bounds are key objects (``kind="hex"``: bytes).

        ``from_key`` inclusive, ``to_key`` exclusive, ``prefix`` on the serialised bytes.
        """
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

    def _bounds(
        self, from_key: Any, to_key: Any, prefix: Any, kind: str
    ) -> tuple[bytes | None, bytes | None, bytes | None]:
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

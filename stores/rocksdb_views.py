"""Read-only views of RocksDB databases.

Of a live engine (read from another thread while its task writes) and of a directory nobody
writes (a local checkpoint, opened read-only).

Both scan with a status check at the end, so a damaged block fails the read with
:class:`~samzapy.errors.StorageFailure` instead of cutting the answer short.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from samzapy.errors import StorageFailure
from samzapy.stores.failures import is_rocksdb_error, iterator_failure, storage_failure

#: Bytes of the write timestamp RocksDB's TTL mode appends to every stored value.
TTL_SUFFIX = 4


def scan(
    db: Rdict, db_dir: Path, from_key: bytes | None, to_key: bytes | None, limit: int
) -> list[tuple[bytes, bytes]]:
    """Up to ``limit`` entries of ``db`` with ``from_key <= key < to_key`` (``None``: unbounded).

    Raises:
        StorageFailure: the scan met a damaged block or an unreadable file.
    """
    it = db.iter()
    if from_key is None:
        it.seek_to_first()
    else:
        it.seek(from_key)
    found: list[tuple[bytes, bytes]] = []
    while it.valid() and len(found) < limit:
        key = it.key()
        if to_key is not None and key >= to_key:
            return found
        found.append((key, it.value()))
        it.next()
    failure = iterator_failure(it, db_dir, len(found)) if len(found) < limit else None
    del it  # not kept alive by the traceback: it holds the database open
    if failure is not None:
        raise failure
    return found


def get(db: Rdict, db_dir: Path, key: bytes) -> bytes | None:
    """``db``'s value of ``key``; RocksDB's errors as :class:`StorageFailure`."""
    try:
        return db.get(key)
    except Exception as exc:
        if not is_rocksdb_error(exc):
            raise
        raise storage_failure(exc, db_dir, "reading") from exc


class LiveRocksDBView:
    """Reads a live engine's database from another thread.

    RocksDB reads are thread-safe; each scan sees an implicit snapshot. The owner's database is
    looked up at every call, so a view taken before a restore reads the restored database.
    """

    def __init__(self, database: Callable[[], Rdict | None], db_dir: Path) -> None:
        self._database = database
        self.db_dir = db_dir

    def _db(self) -> Rdict:
        db = self._database()
        if db is None:
            msg = f"store at '{self.db_dir}' is closed: its task stopped"
            raise StorageFailure(msg, store=self.db_dir.parent.name, path=str(self.db_dir))
        return db

    def get(self, key: bytes) -> bytes | None:
        """The engine's value of ``key``."""
        return get(self._db(), self.db_dir, key)

    def scan(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries of the engine in ``[from_key, to_key)``."""
        return scan(self._db(), self.db_dir, from_key, to_key, limit)

    def close(self) -> None:
        """Nothing to release: the database belongs to its task."""


class ReadOnlyRocksDB:
    """A RocksDB directory nobody writes (a local checkpoint), opened read-only.

    ``ttl=True`` for a store in TTL mode: its values carry RocksDB's 4-byte write timestamp,
    which a read-only open does not strip; the view does.

    Raises:
        StorageFailure: the directory does not open (the message names the file).
    """

    def __init__(self, db_dir: Path, *, ttl: bool = False) -> None:
        self.db_dir = db_dir
        self._ttl = ttl
        try:
            self._db: Rdict | None = Rdict(
                str(db_dir), options=Options(raw_mode=True), access_type=AccessType.read_only()
            )
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise storage_failure(exc, db_dir, "opening a read-only copy") from exc

    def _value(self, data: bytes | None) -> bytes | None:
        return data[:-TTL_SUFFIX] if data is not None and self._ttl else data

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``."""
        assert self._db is not None, "closed"
        return self._value(get(self._db, self.db_dir, key))

    def scan(self, from_key: bytes | None, to_key: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries in ``[from_key, to_key)``."""
        assert self._db is not None, "closed"
        entries = scan(self._db, self.db_dir, from_key, to_key, limit)
        if not self._ttl:
            return entries
        return [(k, v[:-TTL_SUFFIX]) for k, v in entries]

    def close(self) -> None:
        """Close the database (errors closing a read-only copy change nothing: ignored)."""
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception as exc:  # noqa: BLE001 - read-only: nothing to lose
                if not is_rocksdb_error(exc):
                    raise

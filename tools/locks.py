"""Is a RocksDB directory open in a live process? Asked without taking its lock.

RocksDB holds an ``fcntl`` record lock on ``<db>/LOCK`` while a database is open read-write.
We only *query* it (``F_OFD_GETLK``, else ``F_GETLK``), so asking never takes, and can never
release, anybody's lock. Open-file-description locks conflict with classic POSIX locks even
inside one process, so the query also sees a store this very process has open. Where the
query is unsupported the answer is "unknown" (``None``).
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Sequence
from pathlib import Path

#: ``struct flock`` on Linux (64-bit off_t): l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = struct.Struct("hhqqi4x")
_GETLK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)


def is_locked(db_dir: Path) -> bool | None:
    """Whether the RocksDB database in ``db_dir`` is open read-write somewhere now.

    ``False`` when there is no LOCK file; ``None`` when the platform cannot tell.
    """
    lock = db_dir / "LOCK"
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, _GETLK, query)
        return _FLOCK.unpack(answer)[0] != fcntl.F_UNLCK
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)


def locked_stores(base_dir: Path, stores: Sequence[str]) -> list[Path]:
    """The ``<base_dir>/<store>/Partition_<N>`` directories of ``stores`` open in a live process."""
    found = []
    for store in stores:
        root = base_dir / store
        if not root.is_dir():
            continue
        for db_dir in sorted(root.glob("Partition_*")):
            if db_dir.is_dir() and is_locked(db_dir):
                found.append(db_dir)
    return found

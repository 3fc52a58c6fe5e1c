"""Is a RocksDB directory open in a live process? Asked without taking its lock.

RocksDB holds an ``fcntl`` record lock on ``<db>/LOCK`` while a database is open read-write.
Closing *any* descriptor of a file drops every classic POSIX lock the closing process holds on
it, so opening LOCK to ask would release the lock of a store this very process has open.
Hence, first, ``/proc/locks`` on Linux (the LOCK file's device and inode), read without
opening LOCK: a lock of this process is always listed there. Only when it lists none do we
*query* the lock (``F_OFD_GETLK``, else ``F_GETLK``) on a descriptor of our own, which never
takes a lock, and now cannot release one of ours; it also sees a process in another PID
namespace, which ``/proc/locks`` hides. Where neither works the answer is "unknown"
(``None``).
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from samzapy.stores.paths import PARTITION_PREFIX

#: ``struct flock`` on Linux (64-bit off_t): l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = struct.Struct("hhqqi4x")
_GETLK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_PROC_LOCKS = "/proc/locks"


def is_locked(db_dir: Path) -> bool | None:
    """Whether the RocksDB database in ``db_dir`` is open read-write somewhere now.

    ``False`` when there is no LOCK file; ``None`` when the platform cannot tell.
    """
    lock = db_dir / "LOCK"
    try:
        st = os.stat(lock)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    if _in_proc_locks(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"):
        return True
    return _query_lock(lock)


def _in_proc_locks(file_id: str) -> bool:
    """Whether ``/proc/locks`` lists a lock on the file ``MAJ:MIN:INODE`` (``False`` without it)."""
    try:
        with open(_PROC_LOCKS, encoding="ascii", errors="replace") as table:
            return any(file_id in line.split() for line in table)
    except OSError:
        return False


def _query_lock(lock: Path) -> bool | None:
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, _GETLK, query)
        locked: bool = _FLOCK.unpack(answer)[0] != fcntl.F_UNLCK
        return locked
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
        for db_dir in sorted(root.glob(f"{PARTITION_PREFIX}*")):  # standby copies included
            if db_dir.is_dir() and is_locked(db_dir):
                found.append(db_dir)
    return found

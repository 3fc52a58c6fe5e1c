"""RocksDB's failures as :class:`~samzapy.errors.StorageFailure`.

Which store, which file, what went wrong and what to do.

``rocksdict`` raises a plain ``Exception`` carrying RocksDB's status text (``IO error: No
space left on device: While appending to file: .../000004.log``, ``Corruption: block checksum
mismatch: ... in .../000009.sst offset 62171 size 551``). Left as it is, the error policy
would take it for a bad message and could skip it: a full disk or a damaged file would then
drop good messages silently. Every call the engine makes into RocksDB turns such an exception
into a ``StorageFailure``, which no skip or dead-letter policy swallows.

A plain ``Exception`` is what rocksdict raises for a RocksDB status; its other errors
(``TypeError`` for a key that is not bytes, ...) are programming errors and pass unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

from rocksdict import RdictIter

from samzapy.errors import StorageFailure

#: A file RocksDB names in its status text.
_FILE_IN_TEXT = re.compile(r"([^\s:,]*(?:\.sst|\.log|\.blob|MANIFEST-\d+|CURRENT|OPTIONS-\d+|IDENTITY))\b")

NO_SPACE = "no-space"
READ_ONLY = "read-only"
CORRUPTION = "corruption"
IO_ERROR = "io-error"
OTHER = "other"

_WHAT = {
    NO_SPACE: "the disk is full",
    READ_ONLY: "the disk is read-only or the directory is not writable",
    CORRUPTION: "the store's files are damaged",
    IO_ERROR: "the disk failed an IO operation",
    OTHER: "RocksDB failed",
}

_FIX = {
    NO_SPACE: (
        "free space on the volume of {dir} and restart the job; nothing after the last commit "
        "was committed, and the restart restores the store and reprocesses from there"
    ),
    READ_ONLY: (
        "make {dir} writable by this user (remount read-write) and restart the job; nothing after "
        "the last commit was committed"
    ),
    CORRUPTION: (
        "restart the job: the restore never trusts the live directory, skips local checkpoints "
        "that fail their checksums and rebuilds the store from the changelog (a store without "
        "a changelog cannot be rebuilt: delete {dir} to start it empty); if it keeps failing, "
        "stop the job, delete {dir} and check the disk"
    ),
    IO_ERROR: (
        "check the disk and the file system holding {dir} (kernel log), then restart the job; "
        "nothing after the last commit was committed"
    ),
    OTHER: (
        "restart the job; if it fails the same way, stop it and delete {dir} (a logged store is "
        "rebuilt from its changelog)"
    ),
}


def is_rocksdb_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a RocksDB status raised by rocksdict (a plain ``Exception``)."""
    return type(exc) is Exception


def status_text(exc: BaseException) -> str:
    """RocksDB's status text on one line."""
    return " ".join(str(exc).split())


def kind_of(text: str) -> str:
    """The kind of failure a RocksDB status text describes.

    >>> kind_of("IO error: No space left on device: While appending to file: db/000004.log")
    'no-space'
    >>> kind_of("Corruption: block checksum mismatch: stored = 1, computed = 2 in db/000009.sst")
    'corruption'
    >>> kind_of("IO error: While open a file for appending: db/000012.log: Read-only file system")
    'read-only'
    """
    lowered = text.lower()
    if "no space left" in lowered or "enospc" in lowered:
        return NO_SPACE
    if "read-only file system" in lowered or "permission denied" in lowered or "erofs" in lowered:
        return READ_ONLY
    if lowered.startswith("corruption") or "checksum mismatch" in lowered or "corrupt" in lowered:
        return CORRUPTION
    if "no such file or directory" in lowered or "truncated" in lowered:
        return CORRUPTION  # a file the MANIFEST lists is gone or short: the store is damaged
    if lowered.startswith("io error"):
        return IO_ERROR
    return OTHER


def file_in(text: str) -> str | None:
    """The file RocksDB's status text names, if any.

    >>> file_in("Corruption: block checksum mismatch ... in /s/counts/Partition_0/000009.sst offset 1")
    '/s/counts/Partition_0/000009.sst'
    """
    found = _FILE_IN_TEXT.search(text)
    return found.group(1) if found else None


def storage_failure(exc: BaseException, db_dir: Path, doing: str) -> StorageFailure:
    """The :class:`StorageFailure` for RocksDB's ``exc`` while ``doing`` something.

    The :class:`StorageFailure` for RocksDB's ``exc`` while ``doing`` something (``"writing"``,
    ``"reading"``...) on the database in ``db_dir``: the store, the file, what and the fix.
    """
    text = status_text(exc)
    kind = kind_of(text)
    file = file_in(text)
    store = db_dir.parent.name
    where = f"store '{store}' ({db_dir.name}) at '{db_dir}'"
    named = f", file {file}" if file else ""
    message = f"{where}: {_WHAT[kind]} while {doing}{named} (RocksDB: {text}). " + _FIX[kind].format(
        dir=db_dir
    )
    return StorageFailure(message, store=store, path=file or str(db_dir))


def iterator_failure(it: RdictIter, db_dir: Path, read: int) -> StorageFailure | None:
    """After a RocksDB iterator's ``valid()`` turned false.

    The failure if the walk stopped on an error (a corrupted block, an unreadable file) rather
    than at the end of the keys.

    RocksDB ends an iterator that meets an error as if the keys had ended; only ``status()``
    tells. Without this check a scan would return partial data as complete. The failure is
    returned, not raised, so that the caller can drop the iterator first (a traceback would
    keep it, and with it the database and its lock, alive).
    """
    try:
        it.status()
    except Exception as exc:
        if not is_rocksdb_error(exc):
            raise
        return storage_failure(
            exc, db_dir, f"iterating (after {read:,} entries; what was read is incomplete)"
        )
    return None


def check_iterator(it: RdictIter, db_dir: Path, read: int) -> None:
    """Raise :func:`iterator_failure`'s failure, if any (for a caller that keeps ``it`` anyway).

    Raises:
        StorageFailure: the iterator failed after ``read`` entries.
    """
    failure = iterator_failure(it, db_dir, read)
    if failure is not None:
        raise failure

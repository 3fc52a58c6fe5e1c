"""A tool never shows a damaged store's partial contents as complete.

RocksDB leaves three ways to read damage as data, and a tool checks each:

* an iterator that meets a corrupted block or an unreadable file just stops, as if the keys
  had ended: ``valid()`` turns false and only ``status()`` tells. :func:`check_iterator` asks
  it after every walk.
* a *secondary* instance (how the tools read a live job's store) silently leaves out SST files
  that are missing or truncated, since a primary may be deleting files under it: a truncated
  file reads as zero keys. For a store no live process has open, :func:`probe` first opens it
  read-only, which checks every file the MANIFEST lists (present, right size) and fails on
  damage naming the file.
* a store whose MANIFEST (or CURRENT) is gone opens with RocksDB's secondary-instance text
  "the primary may have switched to a new MANIFEST", which misleads for a dead store:
  :func:`check_manifest` says plainly what is missing.

Damage raises :class:`~samzapy.errors.StorageFailure` (the tools exit 1 with ``Error:``),
naming the file when RocksDB does, and saying how to get a good copy back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rocksdict import AccessType, Options, Rdict

from samzapy.errors import StorageFailure
from samzapy.ondisk.locks import is_locked

_MANIFEST_NAME = re.compile(r"^MANIFEST-\d+$")
_SST_IN_TEXT = re.compile(r"([^\s:,]+\.sst)")
#: The names RocksDB writes into a database directory (for telling a damaged store from a
#: directory that never was one).
_DB_FILES = ("MANIFEST-*", "*.sst", "OPTIONS-*", "IDENTITY")

FIX = (
    "do not use this copy: rebuild the store from its changelog "
    "(state-storage-tool restore --config-path CONFIG --path DIR), or, for a job's own store, "
    "stop the job, delete '{path}' and start the job again (it restores the store from its changelog)"
)


class NotAStoreError(Exception):
    """The directory does not hold a RocksDB store at all (as opposed to a damaged one).

    Callers turn it into their bad-argument error.
    """


def looks_like_db(path: Path) -> bool:
    """Whether ``path`` holds files only RocksDB writes (a store, possibly damaged)."""
    return (path / "CURRENT").is_file() or any(next(path.glob(p), None) for p in _DB_FILES)


def damaged(path: Path, what: str, store: str | None = None, file: Path | None = None) -> StorageFailure:
    """The error for a damaged store at ``path``.

    The file (``file``, else the SST RocksDB names in ``what``), what is wrong, then the fix.
    """
    if file is None:
        found = _SST_IN_TEXT.search(what)
        file = Path(found.group(1)) if found else None
    named = "" if store is None else f"'{store}' "
    text = f"store {named}at '{path}' is damaged"
    text += f", file {file}" if file is not None else ""
    text += f": {what}; {FIX.format(path=path)}"
    return StorageFailure(text, store=store, path=str(file or path))


def check_manifest(path: Path, store: str | None = None) -> None:
    """Fail plainly when the CURRENT file or the MANIFEST it names is missing.

    Raises:
        NotAStoreError: CURRENT does not name a MANIFEST (the directory is no RocksDB store).
        StorageFailure: CURRENT or the MANIFEST it names is missing.
    """
    current = path / "CURRENT"
    if not current.is_file():
        what = "it is missing, so RocksDB cannot find the MANIFEST that lists the store's files"
        raise damaged(path, what, store, current)
    name = current.read_text(errors="replace").strip()
    if not _MANIFEST_NAME.match(name):
        msg = f"its CURRENT file names {name[:40]!r}, not a MANIFEST-<number> file"
        raise NotAStoreError(msg)
    if not (path / name).is_file():
        what = (
            "this MANIFEST (named by CURRENT) is missing: the list of the store's files is lost, "
            "so none of its data can be read"
        )
        raise damaged(path, what, store, path / name)


def probe(path: Path, store: str | None = None) -> None:
    """Open a store no live process has open read-only once, to check its files.

    RocksDB then checks every file its MANIFEST lists. A live store is left to its primary (a
    read-only open could race the primary deleting files it compacted away).

    Raises:
        StorageFailure: a listed file is missing, truncated or unreadable.
    """
    if is_locked(path) is not False:
        return
    options = Options(raw_mode=True)
    options.set_max_open_files(-1)  # open (and so check) every table file now
    try:
        db = Rdict(str(path), options=options, access_type=AccessType.read_only())
    except Exception as exc:  # rocksdict raises plain Exception with RocksDB's status text
        raise damaged(path, _status_text(exc), store) from None
    db.close()


def check_iterator(it: Any, path: Path, read: int, store: str | None = None) -> None:
    """After ``it.valid()`` turned false: fail if the walk stopped on an error, not at the end.

    Raises:
        StorageFailure: the iterator met a corrupted block or an unreadable file after
            ``read`` entries.
    """
    try:
        it.status()
    except Exception as exc:  # rocksdict raises plain Exception with RocksDB's status text
        what = f"reading stopped after {read:,} entries on: {_status_text(exc)} (what was read is incomplete)"
        raise damaged(path, what, store) from None


def failed_read(exc: Exception, path: Path, store: str | None = None) -> StorageFailure:
    """The error for a point read (``get``) that RocksDB failed."""
    return damaged(path, f"a read failed: {_status_text(exc)}", store)


def _status_text(exc: Exception) -> str:
    return " ".join(str(exc).split())

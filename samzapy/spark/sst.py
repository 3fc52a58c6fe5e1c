"""SST files: written from sorted entries in executors, ingested into fresh stores on the driver.

The handoff between the two (DESIGN §8; docs/operations.md):

- ``shared`` (default): executors write the files into a staging directory that the driver
  sees at the same path: any directory in ``local[*]`` mode, a shared mount (NFS, a
  Kubernetes shared volume...) on a cluster.
- ``collect``: executors write into their own temporary directory and return the files'
  bytes, in chunks of at most :data:`CHUNK_BYTES`, through Spark to the driver, which writes
  them into its staging directory. Works on any cluster; all store bytes pass the driver.

An ingested store gets a local checkpoint (RocksDB checkpoint + ``OFFSET`` file, the layout of
:mod:`samzapy.stores.checkpoints`) at the changelog offset it reflects, which is what the job's
own restore trusts: a job started on the directory replays only the changelog after it.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samzapy.config.model import StoreConfig
from samzapy.spark import SparkJobError
from samzapy.stores.checkpoints import OFFSET_FILE, LocalCheckpoints
from samzapy.stores.factory import rocksdb_options, store_dir
from samzapy.stores.rocksdb import RocksDBStore, open_rdict

log = logging.getLogger(__name__)

#: An SST file is closed and a new one started after this many bytes (files stay sorted and
#: disjoint, so several are ingested in one call).
MAX_SST_BYTES = 256 * 1024 * 1024
#: Largest piece of a file sent back to the driver in ``collect`` mode.
CHUNK_BYTES = 32 * 1024 * 1024
HANDOFFS = ("shared", "collect")


@dataclass(frozen=True)
class SstFile:
    """One written SST file of a store partition.

    ``order`` sorts the files of a store partition for ingestion: files with a larger order
    hold newer data (a later offset range) and are ingested after the others.
    """

    store: str
    partition: int
    order: int
    path: str
    entries: int


def check_ingestible(config: StoreConfig, *, ttl_ok: bool = False) -> None:
    """Raise :class:`SparkJobError` for a store whose files cannot be SST-ingested.

    ``ttl_ok``: a store with ``rocksdb.ttl.ms`` is fine (:class:`SstSink` writes its values with
    RocksDB's write time, as its TTL mode stores them). The state writes
    (:mod:`samzapy.spark.state_data.write`) pass it; the bulk restore does not take TTL stores yet
    (not tested there), and restores them sequentially.
    """
    if config.engine != "rocksdb":
        msg = f"store '{config.name}' is {config.engine}: only RocksDB stores are written as SST files"
        raise SparkJobError(msg)
    if config.ttl_ms is not None and not ttl_ok:
        msg = (
            f"store '{config.name}' has stores.{config.name}.rocksdb.ttl.ms set: a TTL database keeps a "
            "timestamp in every value, which SST ingestion would not write. Restore it sequentially "
            "(stores.S.restore.engine=sequential, or the tool's default engine)"
        )
        raise SparkJobError(msg)


def ttl_stamp(now_s: float | None = None) -> bytes:
    """What RocksDB's TTL mode appends to every stored value.

    The write time in whole seconds, 4 bytes little-endian (``DBWithTTL``'s ``EncodeFixed32``);
    ``now_s`` default: now.

    >>> ttl_stamp(1_700_000_000.9).hex()
    '00f15365'
    """
    return struct.pack("<i", int(time.time() if now_s is None else now_s))


class SstSink:
    """Writes sorted entries of one store partition into SST files (rolling by size).

    ``put`` and ``delete`` must come in strictly increasing key order (RocksDB's SST writer
    checks it). A delete writes a deletion entry, which hides an older value of the key once
    the file is ingested after the file holding that value.

    A store with ``rocksdb.ttl.ms`` gets its values as its TTL mode stores them: followed by
    the write time (:func:`ttl_stamp`, the sink's creation time for every value). That is when
    the entries' TTL starts, as the sequential restore starts it at the restore: the changelog
    does not keep the original write times.
    """

    def __init__(self, directory: Path, config: StoreConfig, partition: int, order: int) -> None:
        self.directory = directory
        self.config = config
        self.partition = partition
        self.order = order
        self.files: list[SstFile] = []
        self._writer: Any = None
        self._path: Path | None = None
        self._entries = 0
        self._stamp = ttl_stamp() if config.ttl_ms is not None else b""

    def _open(self) -> Any:
        from rocksdict import SstFileWriter

        self.directory.mkdir(parents=True, exist_ok=True)
        unique = uuid.uuid4().hex[:8]
        name = f"{self.config.name}-p{self.partition}-o{self.order:020d}-{len(self.files):04d}-{unique}"
        self._path = self.directory / f"{name}.sst"
        writer = SstFileWriter(options=rocksdb_options(self.config).to_options())
        writer.open(str(self._path))
        self._writer, self._entries = writer, 0
        return writer

    def put(self, key: bytes, value: bytes) -> None:
        """Write ``key`` = ``value``."""
        writer = self._writer or self._open()
        writer[key] = value + self._stamp
        self._after_write()

    def delete(self, key: bytes) -> None:
        """Write a deletion of ``key``."""
        writer = self._writer or self._open()
        del writer[key]
        self._after_write()

    def write_sorted(self, keys: list[bytes], values: list[bytes | None], *, deletes: bool) -> int:
        """Write ``keys`` (strictly increasing) = ``values``; returns the number of values written.

        A ``None`` value writes a deletion of its key when ``deletes``, else nothing. The same
        as :meth:`put` / :meth:`delete` key by key, in one loop (the bulk restore's per-key cost).
        """
        stamp = self._stamp
        written = 0
        for key, value in zip(keys, values, strict=True):
            if value is None and not deletes:
                continue
            writer = self._writer or self._open()
            if value is None:
                del writer[key]
            else:
                writer[key] = value + stamp if stamp else value
                written += 1
            self._entries += 1
            if self._entries % 4096 == 0 and writer.file_size() >= MAX_SST_BYTES:
                self._finish()
        return written

    def _after_write(self) -> None:
        self._entries += 1
        if self._entries % 4096 == 0 and self._writer.file_size() >= MAX_SST_BYTES:
            self._finish()

    def _finish(self) -> None:
        if self._writer is None:
            return
        self._writer.finish()
        order = self.order * 10_000 + len(self.files)
        self.files.append(SstFile(self.config.name, self.partition, order, str(self._path), self._entries))
        self._writer = None

    def close(self) -> list[SstFile]:
        """Finish the open file; every file written."""
        self._finish()
        return self.files


def file_chunks(path: str) -> Iterator[tuple[int, bytes]]:
    """``(index, bytes)`` pieces of a file for the ``collect`` handoff."""
    with open(path, "rb") as f:
        index = 0
        while chunk := f.read(CHUNK_BYTES):
            yield index, chunk
            index += 1


def executor_dir(handoff: str, staging: str) -> Path:
    """Where an executor writes its SST files for ``handoff``."""
    if handoff == "shared":
        return Path(staging)
    return Path(tempfile.mkdtemp(prefix="samzapy-sst-"))


def ingest_store(
    config: StoreConfig,
    base_dir: Path,
    partition: int,
    files: Iterable[SstFile],
    changelog_offset: int | None,
    *,
    base: Path | None = None,
) -> Path:
    """Build ``<base_dir>/<store>/Partition_<N>`` afresh from ``files`` (ingested in order).

    Whatever was there before (live directory and local checkpoints) is deleted first; the
    store then starts empty, or as ``base`` (a RocksDB checkpoint, e.g. a downloaded snapshot,
    moved into place: on the same filesystem), and the files are ingested over it. With
    ``changelog_offset`` (the last changelog offset the files reflect) a local checkpoint at
    that offset is taken, so that the job's restore uses the store and replays only the
    changelog after it; ``None`` (the changelog had no record) leaves no checkpoint.
    """
    from rocksdict import IngestExternalFileOptions

    check_ingestible(config, ttl_ok=True)  # the files come from SstSink, which stamps TTL values
    live = store_dir(base_dir, config.name, partition)
    topic = config.changelog.stream if config.changelog is not None else None
    LocalCheckpoints(live, topic or "", partition).delete_all()
    shutil.rmtree(live, ignore_errors=True)
    if base is not None:
        live.parent.mkdir(parents=True, exist_ok=True)
        os.rename(base, live)
        (live / OFFSET_FILE).unlink(missing_ok=True)  # a local checkpoint's marker, not RocksDB's
    ordered = sorted(files, key=lambda f: f.order)
    db = open_rdict(live, rocksdb_options(config))
    try:
        options = IngestExternalFileOptions()
        options.set_move_files(True)
        for sst in ordered:  # one call per file: a later file may overwrite keys of an earlier one
            db.ingest_external_file([sst.path], options)
    finally:
        db.close()
    if topic is not None and changelog_offset is not None:
        store = RocksDBStore(live, rocksdb_options(config))
        try:
            LocalCheckpoints(live, topic, partition).create(store, changelog_offset)
        finally:
            store.close()
    log.info(
        "store %s partition %d: %d SST files ingested, %s",
        config.name,
        partition,
        len(ordered),
        "no local checkpoint (nothing in the changelog)"
        if changelog_offset is None or topic is None
        else f"local checkpoint at changelog offset {changelog_offset}",
    )
    return live


def write_collected(rows: Iterable[Any], staging: Path) -> dict[str, str]:
    """Reassemble files sent back in chunks (``collect`` handoff) into ``staging``.

    ``rows`` have ``path``, ``chunk`` and ``data``; returns executor path -> driver path.
    """
    staging.mkdir(parents=True, exist_ok=True)
    placed: dict[str, str] = {}
    for row in rows:
        target = placed.get(row["path"])
        if target is None:
            target = placed[row["path"]] = str(staging / os.path.basename(row["path"]))
        with open(target, "r+b" if row["chunk"] else "wb") as f:
            f.seek(row["chunk"] * CHUNK_BYTES)
            f.write(row["data"])
    return placed

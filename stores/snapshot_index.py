"""A store snapshot's index, and where a task's snapshots live in a blob store.

Layout under the blob store's root, for store ``S`` of task ``Partition N`` of job ``J``
(``job.name``-``job.id``)::

    J/S/Partition_N/files/<sha256>.<upload id>    a file of a RocksDB checkpoint (SSTs, MANIFEST, ...)
    J/S/Partition_N/snapshots/<generation>-<offset>-<upload id>.json   an index: the snapshot itself
    J/S/Partition_N/garbage/<file name>.json      "unreferenced since": retention's mark

A snapshot *is* its index: the list of files (blob key, name in the database directory, size,
SHA-256), the changelog topic, partition and offset the files reflect, the ownership and fence
generations of the commit it was taken at, and that commit's input offsets. The index is
written after every file it names, so a snapshot is whole or absent. File blobs are never
overwritten (each upload gets its own id), and a file already in the blob store under a
snapshot that is kept is referenced again instead of being sent again: SST files are
immutable, so most of a RocksDB store's files are shared by consecutive snapshots.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samzapy.stores.blob_store import BlobInfo, BlobStore, BlobStoreError
from samzapy.stores.paths import partition_dir_name

log = logging.getLogger(__name__)

__all__ = [
    "SnapshotFile",
    "SnapshotIndex",
    "SnapshotLayout",
    "TaskSnapshots",
    "file_sha256",
]

INDEX_VERSION = 1
_INDEX_NAME = re.compile(r"^(\d{10})-(\d{20})-([0-9a-f]+)\.json$")


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex (read in 1 MiB pieces)."""
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class SnapshotFile:
    """One file of a snapshot: its ``name`` in the database directory and where its bytes are."""

    name: str
    key: str  # the blob's key, relative to the task's prefix (``files/...``)
    size: int
    sha256: str


@dataclass(frozen=True)
class SnapshotIndex:
    """A complete snapshot of one store of one task (module docstring).

    Attributes:
        task: ``Partition N``.
        store: the store's name.
        changelog_topic, changelog_partition: the changelog the files match.
        changelog_offset: the last changelog record the files reflect.
        generation: the ownership generation of the commit it was taken at.
        fence_generation: that commit's checkpoint fence generation (0: none).
        input_offsets: that commit's input next-offsets (``system.stream/partition`` -> offset).
        files: the database's files.
        created_ms: when the index was written (wall clock, for people).
        upload_id: the id that makes its keys unique.
    """

    task: str
    store: str
    changelog_topic: str
    changelog_partition: int
    changelog_offset: int
    generation: int
    fence_generation: int = 0
    input_offsets: dict[str, int] = field(default_factory=dict)
    files: tuple[SnapshotFile, ...] = ()
    created_ms: int = 0
    upload_id: str = "0"

    @property
    def name(self) -> str:
        """The index's file name: sorts by generation, then changelog offset.

        >>> SnapshotIndex("Partition 0", "s", "t", 0, 42, 3, upload_id="ab").name
        '0000000003-00000000000000000042-ab.json'
        """
        return f"{self.generation:010d}-{self.changelog_offset:020d}-{self.upload_id}.json"

    @property
    def total_bytes(self) -> int:
        """The bytes of all its files."""
        return sum(f.size for f in self.files)

    def to_bytes(self) -> bytes:
        """The index as JSON."""
        body = {
            "version": INDEX_VERSION,
            "task": self.task,
            "store": self.store,
            "changelog": {
                "topic": self.changelog_topic,
                "partition": self.changelog_partition,
                "offset": self.changelog_offset,
            },
            "generation": self.generation,
            "fence_generation": self.fence_generation,
            "inputs": dict(sorted(self.input_offsets.items())),
            "files": [{"name": f.name, "key": f.key, "size": f.size, "sha256": f.sha256} for f in self.files],
            "created_ms": self.created_ms,
            "upload_id": self.upload_id,
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> SnapshotIndex:
        """Parse :meth:`to_bytes`' output.

        Raises:
            ValueError: not an index of a known version (``KeyError``/``TypeError`` become it).
        """
        try:
            body: dict[str, Any] = json.loads(data)
            if body.get("version") != INDEX_VERSION:
                msg = f"unknown snapshot index version {body.get('version')!r}"
                raise ValueError(msg)
            changelog = body["changelog"]
            return cls(
                task=str(body["task"]),
                store=str(body["store"]),
                changelog_topic=str(changelog["topic"]),
                changelog_partition=int(changelog["partition"]),
                changelog_offset=int(changelog["offset"]),
                generation=int(body["generation"]),
                fence_generation=int(body.get("fence_generation", 0)),
                input_offsets={str(k): int(v) for k, v in body.get("inputs", {}).items()},
                files=tuple(
                    SnapshotFile(str(f["name"]), str(f["key"]), int(f["size"]), str(f["sha256"]))
                    for f in body["files"]
                ),
                created_ms=int(body.get("created_ms", 0)),
                upload_id=str(body.get("upload_id", "0")),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            msg = f"not a snapshot index: {exc}"
            raise ValueError(msg) from exc


@dataclass(frozen=True)
class SnapshotLayout:
    """The keys of one task's snapshots of one store (module docstring).

    >>> layout = SnapshotLayout("pageviews-1", "counts", 3)
    >>> layout.prefix, layout.index_key("x.json"), layout.marker_key("files/ab.1")
    ('pageviews-1/counts/Partition_3/', 'pageviews-1/counts/Partition_3/snapshots/x.json', \
'pageviews-1/counts/Partition_3/garbage/ab.1.json')
    """

    job: str
    store: str
    partition: int

    @property
    def prefix(self) -> str:
        """Every key of the task's store starts with this."""
        return f"{self.job}/{self.store}/{partition_dir_name(self.partition)}/"

    def file_key(self, sha256: str, upload_id: str) -> str:
        """A file blob's key, relative to :attr:`prefix`."""
        return f"files/{sha256}.{upload_id}"

    def index_key(self, name: str) -> str:
        """The full key of index ``name``."""
        return f"{self.prefix}snapshots/{name}"

    def marker_key(self, file_key: str) -> str:
        """The full key of the retention mark of a file blob (``files/...``)."""
        return f"{self.prefix}garbage/{file_key.removeprefix('files/')}.json"

    def full(self, relative: str) -> str:
        """A key relative to :attr:`prefix` made full."""
        return self.prefix + relative

    def classify(self, key: str) -> tuple[str, str] | None:
        """``("index"|"file"|"marker", relative name)`` of a full key under :attr:`prefix`.

        >>> SnapshotLayout("j", "s", 0).classify("j/s/Partition_0/garbage/ab.1.json")
        ('marker', 'files/ab.1')
        """
        if not key.startswith(self.prefix):
            return None
        rest = key[len(self.prefix) :]
        kind, _, name = rest.partition("/")
        if kind == "snapshots" and _INDEX_NAME.match(name):
            return "index", name
        if kind == "files" and name:
            return "file", rest
        if kind == "garbage" and name.endswith(".json"):
            return "marker", "files/" + name.removesuffix(".json")
        return None


def job_label(job_name: str, job_id: str) -> str:
    """The top folder of a job's snapshots: ``<job.name>-<job.id>`` (spaces as ``_``).

    >>> job_label("page views", "1")
    'page_views-1'
    """
    return f"{job_name}-{job_id}".replace(" ", "_")


class TaskSnapshots:
    """The blob store's view of one task's store: its indexes, files and marks, from one listing.

    Parsed indexes are cached by key in ``cache`` (an index never changes once written).
    """

    def __init__(
        self, blob: BlobStore, layout: SnapshotLayout, cache: dict[str, SnapshotIndex] | None = None
    ) -> None:
        self.blob = blob
        self.layout = layout
        self.cache = cache if cache is not None else {}
        self.index_names: list[str] = []
        self.files: dict[str, BlobInfo] = {}  # "files/..." -> info
        self.marked: set[str] = set()  # "files/..." with a retention mark
        self.refresh()

    def refresh(self) -> None:
        """List the blob store again."""
        self.index_names, self.files, self.marked = [], {}, set()
        for info in self.blob.list(self.layout.prefix):
            found = self.layout.classify(info.key)
            if found is None:
                continue
            kind, name = found
            if kind == "index":
                self.index_names.append(name)
            elif kind == "file":
                self.files[name] = info
            else:
                self.marked.add(name)
        self.index_names.sort()

    def index(self, name: str) -> SnapshotIndex:
        """The parsed index ``name`` (cached).

        Raises:
            BlobStoreError: it cannot be read; ValueError: it does not parse.
        """
        key = self.layout.index_key(name)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = SnapshotIndex.from_bytes(self.blob.get_bytes(key))
        return found

    def readable_indexes(self) -> list[SnapshotIndex]:
        """Every index that reads and parses, newest first (generation, then offset).

        An unreadable one is logged and left out.
        """
        found = []
        for name in reversed(self.index_names):
            try:
                found.append(self.index(name))
            except (BlobStoreError, ValueError) as exc:
                log.warning("snapshot index %s is unreadable, left out: %s", self.layout.index_key(name), exc)
        return found

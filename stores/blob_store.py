"""Blob stores for store snapshots: a directory (``file://``) and S3 or an S3-compatible service.

A blob store holds immutable objects under string keys (``/``-separated). The snapshot code
(:mod:`samzapy.stores.snapshot_upload`, :mod:`samzapy.stores.snapshot_restore`) needs only
what every object store offers, so both backends promise the same few things:

* ``put_file`` / ``put_bytes`` make an object visible whole or not at all: the directory
  backend writes a temporary file and renames it; S3 makes an object (a multipart upload
  too) visible only once it is complete. A process killed during a put leaves no object under
  the key (the directory backend may leave a ``.tmp-`` file, which listings skip);
* ``list(prefix)`` returns every object under ``prefix`` with its size;
* ``delete`` of a missing key is not an error.

Credentials for S3 never come from the job file: boto3 reads them the usual way
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``~/.aws/credentials``,
an instance or pod role).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from samzapy.errors import ConfigError, StoreError

__all__ = ["BlobInfo", "BlobStore", "BlobStoreError", "DirectoryBlobStore", "S3BlobStore", "open_blob_store"]

#: Marks a directory backend's file still being written (never listed, never read).
_TMP_MARK = ".tmp-"


class BlobStoreError(StoreError):
    """A blob store call failed (unreachable service, missing object, permission, ...).

    Not a :class:`~samzapy.errors.StorageFailure`: a blob store that fails delays snapshots,
    it never stops a task (the changelog still holds everything).
    """


@dataclass(frozen=True)
class BlobInfo:
    """One object of a listing: its key (relative to the store's root) and size in bytes."""

    key: str
    size: int


class BlobStore(Protocol):
    """What the snapshot code needs from a blob store (module docstring)."""

    def put_file(self, key: str, path: Path) -> None:
        """Store the file at ``path`` under ``key``, whole or not at all."""

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, whole or not at all."""

    def get_file(self, key: str, path: Path) -> None:
        """Write the object ``key`` to the file ``path`` (replaced)."""

    def get_bytes(self, key: str) -> bytes:
        """The bytes of the object ``key``."""

    def list(self, prefix: str) -> list[BlobInfo]:
        """Every object whose key starts with ``prefix``."""

    def delete(self, key: str) -> None:
        """Delete the object ``key`` (no error when it is gone)."""

    def describe(self) -> str:
        """Where the blobs are, for log lines (no credentials)."""


class DirectoryBlobStore:
    """Blobs as files under a directory (a shared file system, or tests).

    Thread-safe: every write goes to a unique temporary file first.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            msg = f"blob key {key!r} leaves the blob store's directory"
            raise BlobStoreError(msg)
        return self.root / key

    def _publish(self, key: str, write: Any) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}{_TMP_MARK}{uuid.uuid4().hex[:12]}")
        try:
            with open(tmp, "wb") as out:
                write(out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)  # atomic: the key shows the whole object or nothing
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            msg = f"cannot write blob {key} under {self.root}: {exc}"
            raise BlobStoreError(msg) from exc

    def put_file(self, key: str, path: Path) -> None:
        """Copy ``path`` in under ``key`` (temporary file, fsync, rename)."""

        def copy(out: Any) -> None:
            with open(path, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 20)

        self._publish(key, copy)

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write ``data`` under ``key`` (temporary file, fsync, rename)."""
        self._publish(key, lambda out: out.write(data))

    def get_file(self, key: str, path: Path) -> None:
        """Copy the blob ``key`` to ``path``."""
        try:
            shutil.copyfile(self._path(key), path)
        except OSError as exc:
            msg = f"cannot read blob {key} under {self.root}: {exc}"
            raise BlobStoreError(msg) from exc

    def get_bytes(self, key: str) -> bytes:
        """The bytes of blob ``key``."""
        try:
            return self._path(key).read_bytes()
        except OSError as exc:
            msg = f"cannot read blob {key} under {self.root}: {exc}"
            raise BlobStoreError(msg) from exc

    def list(self, prefix: str) -> list[BlobInfo]:
        """Every complete blob under ``prefix`` (temporary files left by a kill are skipped)."""
        base = self._path(prefix.rstrip("/")) if prefix else self.root
        found: list[BlobInfo] = []
        try:
            walk = list(os.walk(base))
        except OSError as exc:
            msg = f"cannot list blobs under {base}: {exc}"
            raise BlobStoreError(msg) from exc
        for directory, _, names in walk:
            for name in names:
                if _TMP_MARK in name:
                    continue
                path = Path(directory) / name
                try:
                    size = path.stat().st_size
                except OSError:
                    continue  # deleted during the walk
                found.append(BlobInfo(path.relative_to(self.root).as_posix(), size))
        return sorted(found, key=lambda b: b.key)

    def delete(self, key: str) -> None:
        """Remove blob ``key``."""
        try:
            self._path(key).unlink(missing_ok=True)
        except OSError as exc:
            msg = f"cannot delete blob {key} under {self.root}: {exc}"
            raise BlobStoreError(msg) from exc

    def describe(self) -> str:
        """``file://<root>``."""
        return f"file://{self.root}"


class S3BlobStore:
    """Blobs as objects of an S3 bucket (or an S3-compatible service: ``endpoint``).

    boto3 is imported here, lazily (the ``s3`` extra). Its client is thread-safe; large files
    go up as multipart uploads, which S3 shows only once complete.
    """

    def __init__(
        self, bucket: str, prefix: str, *, endpoint: str | None = None, region: str | None = None
    ) -> None:
        try:
            import boto3  # type: ignore[import-untyped,unused-ignore]  # no types shipped
            from botocore.config import Config as BotoConfig  # type: ignore[import-untyped,unused-ignore]
        except ImportError as exc:
            msg = "the S3 blob store needs boto3: pip install 'samzapy[s3]'"
            raise ConfigError(msg) from exc
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint = endpoint
        retries = BotoConfig(
            retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30
        )
        self._client = boto3.client("s3", endpoint_url=endpoint, region_name=region, config=retries)
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped,unused-ignore]

        self._errors: tuple[type[BaseException], ...] = (BotoCoreError, ClientError, OSError)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, key: str, call: Any) -> Any:
        try:
            return call()
        except self._errors as exc:
            msg = f"S3 {what} of {self.describe()}/{key} failed: {exc}"
            raise BlobStoreError(msg) from exc

    def put_file(self, key: str, path: Path) -> None:
        """Upload ``path`` (multipart when large)."""
        self._call("upload", key, lambda: self._client.upload_file(str(path), self.bucket, self._key(key)))

    def put_bytes(self, key: str, data: bytes) -> None:
        """Upload ``data`` in one PUT."""
        self._call(
            "put", key, lambda: self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        )

    def get_file(self, key: str, path: Path) -> None:
        """Download object ``key`` to ``path``."""
        self._call(
            "download", key, lambda: self._client.download_file(self.bucket, self._key(key), str(path))
        )

    def get_bytes(self, key: str) -> bytes:
        """The bytes of object ``key``."""
        response = self._call(
            "get", key, lambda: self._client.get_object(Bucket=self.bucket, Key=self._key(key))
        )
        data: bytes = self._call("read", key, lambda: response["Body"].read())
        return data

    def list(self, prefix: str) -> list[BlobInfo]:
        """Every object under ``prefix`` (all pages)."""
        strip = len(self._key(""))
        found: list[BlobInfo] = []

        def pages() -> None:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
                for item in page.get("Contents", ()):
                    found.append(BlobInfo(item["Key"][strip:], int(item["Size"])))

        self._call("list", prefix, pages)
        return sorted(found, key=lambda b: b.key)

    def delete(self, key: str) -> None:
        """Delete object ``key``."""
        self._call("delete", key, lambda: self._client.delete_object(Bucket=self.bucket, Key=self._key(key)))

    def describe(self) -> str:
        """``s3://bucket/prefix`` (and the endpoint, when not AWS)."""
        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return where if self.endpoint is None else f"{where} at {self.endpoint}"


def open_blob_store(uri: str, *, endpoint: str | None = None, region: str | None = None) -> BlobStore:
    """The blob store ``uri`` names: ``file:///path`` or ``s3://bucket[/prefix]``.

    >>> open_blob_store("file:///tmp/snapshots").describe()
    'file:///tmp/snapshots'

    Raises:
        ConfigError: another scheme, or no path or bucket.
    """
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.path and not parsed.netloc:
        return DirectoryBlobStore(Path(parsed.path))
    if parsed.scheme == "s3" and parsed.netloc:
        return S3BlobStore(parsed.netloc, parsed.path, endpoint=endpoint, region=region)
    msg = f"blob store URI {uri!r}: must be file:///absolute/path or s3://bucket[/prefix]"
    raise ConfigError(msg)

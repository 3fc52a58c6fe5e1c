"""The S3 snapshot backend against an S3-compatible server started as a process (moto's
standalone server): uploads are incremental, a restore from a snapshot equals the changelog
restore and the live store, a corrupted object is caught by its checksum."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from s3_server import s3_server  # noqa: E402
from test_snapshots import LAYOUT, build, commit, contents, restored, upload, write  # noqa: E402

from samzapy.stores.blob_store import S3BlobStore, open_blob_store  # noqa: E402
from samzapy.stores.snapshot_index import TaskSnapshots  # noqa: E402
from samzapy.stores.snapshot_restore import SnapshotSource  # noqa: E402
from samzapy.testing import InMemoryChangelog  # noqa: E402

pytest.importorskip("boto3")
pytest.importorskip("moto")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with s3_server("snapshots") as url:
        yield url


def test_s3_snapshots_are_incremental_and_restore_byte_for_byte(tmp_path, endpoint) -> None:
    blob = open_blob_store("s3://snapshots/team/jobs", endpoint=endpoint)
    assert isinstance(blob, S3BlobStore)
    log = InMemoryChangelog("s-changelog", 0)
    engine = build(tmp_path / "live", log)
    write(engine, range(4000))
    first = upload(blob, engine, commit(engine))
    write(engine, range(100, 120), b"changed")
    engine.delete_all([b"key-%06d" % i for i in range(5)])
    offset = commit(engine)
    second = upload(blob, engine, offset)
    new = [f for f in second.index.files if f.sha256 not in {g.sha256 for g in first.index.files}]
    assert second.files_uploaded == len(new) < len(second.index.files)
    write(engine, range(4000, 4500))
    k = commit(engine)
    live = contents(engine)
    engine.close()
    from_snapshot, stats = restored(tmp_path / "a", log, k, SnapshotSource(blob, LAYOUT))
    from_changelog, _ = restored(tmp_path / "b", log, k, None)
    assert from_snapshot == from_changelog == live
    assert stats.base_offset == offset and stats.restored_messages == k - offset
    keys = {b.key for b in blob.list("")}
    assert all(k.startswith("job-1/s/Partition_0/") for k in keys)  # under the URI's prefix only
    view = TaskSnapshots(blob, LAYOUT)
    assert len(view.index_names) == 2


def test_a_corrupted_s3_object_is_caught_by_its_checksum(tmp_path, endpoint, caplog) -> None:
    blob = open_blob_store("s3://snapshots/corrupt", endpoint=endpoint)
    log = InMemoryChangelog("s-changelog", 0)
    engine = build(tmp_path / "live", log)
    write(engine, range(2000))
    k = commit(engine)
    result = upload(blob, engine, k)
    live = contents(engine)
    engine.close()
    sst = next(f for f in result.index.files if f.name.endswith(".sst"))
    blob.put_bytes(LAYOUT.full(sst.key), b"x" * sst.size)  # same size, other bytes
    caplog.set_level("INFO")
    found, stats = restored(tmp_path / "a", log, k, SnapshotSource(blob, LAYOUT))
    assert found == live and stats.base_offset is None
    assert "is damaged, not used" in caplog.text and "SHA-256" in caplog.text

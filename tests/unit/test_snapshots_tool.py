"""``state-storage-tool snapshots list|verify`` on a directory blob store (CliRunner)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from test_snapshots import build, commit, upload, write  # noqa: E402

from samzapy.stores.blob_store import DirectoryBlobStore  # noqa: E402
from samzapy.stores.snapshot_index import SnapshotLayout  # noqa: E402
from samzapy.testing import InMemoryChangelog  # noqa: E402
from samzapy.tools.state_storage import main  # noqa: E402


def job_file(tmp_path: Path, blobs: Path) -> Path:
    path = tmp_path / "job.properties"
    path.write_text(
        "job.name=job\n"
        "task.class=samzapy.task:StreamTask\n"
        "task.inputs=kafka.in\n"
        "stores.s.factory=rocksdb\n"
        "stores.s.changelog=kafka.s-changelog\n"
        "stores.s.backup.factories=kafka,blobstore\n"
        f"blob.store.uri=file://{blobs}\n"
    )
    return path


def test_list_shows_each_snapshot_and_verify_finds_a_damaged_file(tmp_path: Path) -> None:
    blob = DirectoryBlobStore(tmp_path / "blobs")
    engine = build(tmp_path / "live", InMemoryChangelog("s-changelog", 0))
    write(engine, range(500))
    first = upload(blob, engine, commit(engine))
    write(engine, range(500, 600))
    second = upload(blob, engine, commit(engine))
    engine.close()
    config = str(job_file(tmp_path, blob.root))
    runner = CliRunner()
    listed = runner.invoke(main, ["snapshots", "list", "--config-path", config, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert [r["snapshot"] for r in rows] == [second.index.name, first.index.name]
    assert rows[0]["changelog_offset"] == second.index.changelog_offset and rows[0]["task"] == "Partition 0"
    verified = runner.invoke(main, ["snapshots", "verify", "--config-path", config])
    assert verified.exit_code == 0 and "2 snapshots checked: all good" in verified.output
    sst = next(f for f in second.index.files if f.name.endswith(".sst"))
    path = blob.root / SnapshotLayout("job-1", "s", 0).full(sst.key)
    path.write_bytes(b"\0" * sst.size)
    verified = runner.invoke(main, ["snapshots", "verify", "--config-path", config])
    assert verified.exit_code == 1
    assert f"{second.index.name}: DAMAGED: file {sst.name}" in verified.output


def test_a_job_without_a_blob_store_is_told_so(tmp_path: Path) -> None:
    path = tmp_path / "job.properties"
    path.write_text("job.name=job\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.in\n")
    result = CliRunner().invoke(main, ["snapshots", "list", "--config-path", str(path)])
    assert result.exit_code == 2 and "sets no blob.store.uri" in result.output

"""read-rocksdb-tool never shows a damaged store's partial contents as complete (issue 21,
item 4): real RocksDB files in tmp_path, damaged the way disks damage them."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rocksdict import Options, Rdict

from samzapy.ondisk.locks import is_locked
from samzapy.tools.read_rocksdb import main as tool
from samzapy.tools.reader import RocksDbKeyValueReader

ROWS = 20_000


def _write_db(path: Path, keys: list[str]) -> None:
    rng = random.Random(7)
    db = Rdict(str(path), options=Options(raw_mode=True))
    for key in keys:
        db.put(key.encode(), rng.randbytes(24).hex().encode())
    db.flush()  # into an SST file, as a committed store's data is
    db.close()


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job config with store 's' (string keys and values) and one healthy partition of it."""
    root = tmp_path_factory.mktemp("damage")
    (root / "job.properties").write_text(
        "job.name=damage\ntask.class=tools_tasks:KeyValueTask\ntask.inputs=kafka.in\n"
        "stores.s.factory=rocksdb\nstores.s.key.serde=string\nstores.s.msg.serde=string\n"
    )
    _write_db(root / "s" / "Partition_0", [f"key-{i:06d}" for i in range(ROWS)])
    return root


@pytest.fixture
def copy(healthy: Path, tmp_path: Path) -> Path:
    """A copy of the healthy partition, to damage."""
    target = tmp_path / "s" / "Partition_0"
    shutil.copytree(healthy / "s" / "Partition_0", target)
    return target


def _sst(db: Path) -> Path:
    [sst] = sorted(db.glob("*.sst"))
    return sst


def _tool(config_dir: Path, db: Path, *args: str) -> Result:
    return CliRunner().invoke(
        tool,
        [args[0], "-q", "--config-path", str(config_dir / "job.properties"), "--db-path", str(db), *args[1:]],
    )


def test_the_healthy_store_scans_whole(healthy):
    result = _tool(healthy, healthy / "s" / "Partition_0", "scan")
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.splitlines()) == ROWS


def test_scan_of_an_sst_with_flipped_bytes_exits_1_naming_the_file(healthy, copy):
    sst = _sst(copy)
    data = bytearray(sst.read_bytes())
    start = len(data) // 8  # a data block, past the first few thousand keys
    data[start : start + 64] = bytes(b ^ 0xFF for b in data[start : start + 64])
    sst.write_bytes(bytes(data))

    result = _tool(healthy, copy, "scan")

    assert result.exit_code == 1
    printed = len(result.stdout.splitlines())
    assert 0 < printed < ROWS  # the rows before the bad block came out, and then the error
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert f"file {sst}" in result.stderr
    assert f"reading stopped after {printed:,} entries" in result.stderr
    assert "Corruption: block checksum mismatch" in result.stderr
    assert "state-storage-tool restore" in result.stderr  # the fix


def test_count_and_inspect_of_a_corrupted_store_exit_1_too(healthy, copy):
    sst = _sst(copy)
    data = bytearray(sst.read_bytes())
    start = len(data) // 8
    data[start : start + 64] = bytes(b ^ 0xFF for b in data[start : start + 64])
    sst.write_bytes(bytes(data))
    keys = ",".join(f"key-{i:06d}" for i in range(ROWS // 20, ROWS // 4))  # around the bad block

    counted = _tool(healthy, copy, "count")
    inspected = _tool(healthy, copy, "inspect", "--string-key", keys)

    assert counted.exit_code == 1 and counted.stdout == ""
    assert inspected.exit_code == 1 and "a read failed: Corruption" in inspected.stderr
    for result in (counted, inspected):
        assert result.stderr.startswith("Error: ") and f"file {sst}" in result.stderr


def test_scan_of_a_truncated_sst_exits_1_naming_the_file(healthy, copy):
    sst = _sst(copy)
    size = sst.stat().st_size
    sst.write_bytes(sst.read_bytes()[: size // 2])

    result = _tool(healthy, copy, "scan")

    assert result.exit_code == 1
    assert result.stdout == ""  # the secondary instance alone would have shown 0 rows, exit 0
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert f"file {sst}" in result.stderr
    assert f"Expected {size}, actual size {size // 2}" in result.stderr


def test_a_missing_manifest_is_named_plainly_not_as_a_switched_primary(healthy, copy):
    [manifest] = copy.glob("MANIFEST-*")
    manifest.unlink()

    result = _tool(healthy, copy, "scan")

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: store 's' at '{copy}' is damaged, file {manifest}: this MANIFEST (named by CURRENT) "
        "is missing: the list of the store's files is lost, so none of its data can be read; do not "
        "use this copy: rebuild the store from its changelog (state-storage-tool restore "
        "--config-path CONFIG --path DIR), or, for a job's own store, stop the job, delete "
        f"'{copy}' and start the job again (it restores the store from its changelog)\n"
    )
    assert "primary" not in result.stderr


def test_a_missing_current_file_is_named_plainly(healthy, copy):
    (copy / "CURRENT").unlink()

    for db_path in (copy, copy.parent.parent):  # the partition itself, or the base directory
        result = _tool(healthy, db_path, "scan", "--db-name", "s")
        assert result.exit_code == 1, result.output
        assert f"file {copy / 'CURRENT'}: it is missing" in result.stderr


def test_scan_json_over_a_base_directory_labels_each_row_with_its_own_partition(healthy, tmp_path):
    base = tmp_path / "base"
    expected = {}
    for partition in range(3):
        keys = [f"p{partition}-{i}" for i in range(5)]
        _write_db(base / "s" / f"Partition_{partition}", keys)
        expected |= dict.fromkeys(keys, partition)

    result = _tool(healthy, base, "scan", "--db-name", "s", "--format", "json")

    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {row["key"]: row["partition"] for row in rows} == expected
    with RocksDbKeyValueReader("s", base, healthy / "job.properties") as reader:
        assert {key: part for part, key, _ in reader.entries()} == expected


def test_asking_whether_a_store_is_live_never_releases_this_process_lock(tmp_path):
    path = tmp_path / "db"
    db = Rdict(str(path), options=Options(raw_mode=True))
    try:
        # opening and closing LOCK to ask would drop this process's lock after the first call
        assert [is_locked(path), is_locked(path)] == [True, True]
    finally:
        db.close()
    assert is_locked(path) is False

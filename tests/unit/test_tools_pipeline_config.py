"""read-rocksdb-tool and state-storage-tool take a pipeline (``--config-path app.py``) as
``samzapy run`` does, reading its stores with their serdes; the cache note is said once.

Real RocksDB stores on disk, written with the job's own store code; no broker (the stores are
read, not restored).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.metrics import MetricsGroup
from samzapy.serdes import SerdeResolver
from samzapy.stores.factory import build_store
from samzapy.tools.job_source import load_tool_job
from samzapy.tools.read_rocksdb import main as rocksdb_tool
from samzapy.tools.state_storage import main as state_tool

APP = """\
import samzapy

app = samzapy.App("tool-app")
profiles = app.table("profiles", name="profiles")
views = app.stream("views")
views.join(profiles, lambda view, profile: {**view, "zip": profile["zip"]}).to("enriched")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """app.py and its table store written under state/ (partition 0), in the current directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SAMZAPY_HOME", str(tmp_path / "home"))
    (tmp_path / "app.py").write_text(APP)
    setup = load_tool_job("app.py")
    store_config = setup.job.stores["profiles"]
    key_serde, msg_serde = SerdeResolver(setup.job).for_store(store_config)
    store = build_store(
        store_config,
        partition=0,
        base_dir=tmp_path / "state",
        key_serde=key_serde,
        msg_serde=msg_serde,
        changelog=None,
        metrics=MetricsGroup("t"),
    )
    store.put_all([("ann", {"zip": "10115"}), ("bob", {"zip": "75001"})])
    store.close()
    return tmp_path


def _rocksdb(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(rocksdb_tool, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_read_rocksdb_tool_decodes_a_pipeline_store_named_by_its_app_file(project):
    code, out, _ = _rocksdb("scan", "--config-path", "app.py", "--db-path", "state", "--db-name", "profiles")
    assert code == 0, out
    assert out.splitlines() == ['"ann": {"zip":"10115"}', '"bob": {"zip":"75001"}']
    code, out, _ = _rocksdb(
        "inspect",
        "--config-path",
        "app.py:app",
        "--db-path",
        "state",
        "--db-name",
        "profiles",
        "--string-key",
        "bob",
    )
    assert (code, out) == (0, '"bob": {"zip":"75001"}\n')


def test_the_cache_note_is_said_once_per_store(project):
    args = ("count", "--config-path", "app.py", "--db-path", "state", "--db-name", "profiles")
    first, second = _rocksdb(*args), _rocksdb(*args)
    assert first[:2] == second[:2] == (0, "2\n")
    assert "note: store 'profiles' read as a RocksDB secondary instance" in first[2]
    assert "(said once per store)" in first[2]
    assert second[2] == ""


def test_a_broken_app_is_a_bad_argument_naming_its_line(project):
    (project / "broken.py").write_text("import samzapy\n\nraise ValueError('oops')\n")
    code, _, err = _rocksdb("stats", "--config-path", "broken.py", "--db-path", "state")
    assert code == 2
    assert "broken.py:3" in err and "oops" in err


def test_state_storage_tool_finds_the_stores_of_the_app_file(project):
    result = CliRunner().invoke(
        state_tool, ["restore", "--config-path", "app.py", "--path", "out", "--store", "nope"]
    )
    assert result.exit_code == 2
    assert "store 'nope' is not in the config app.py: its stores are profiles" in result.stderr


def test_export_and_snapshots_take_the_app_file_too(project):
    exported = CliRunner().invoke(
        state_tool, ["export", "--config-path", "app.py", "--store", "nope", "--path", "out"]
    )
    assert exported.exit_code == 2
    assert "store 'nope' is not in the config app.py: its stores are profiles" in exported.stderr
    listed = CliRunner().invoke(state_tool, ["snapshots", "list", "--config-path", "app.py"])
    assert listed.exit_code == 2
    assert "app.py sets no blob.store.uri" in listed.stderr

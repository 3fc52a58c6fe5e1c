"""state-storage-tool without a broker: argument and config problems, the engine dispatch and
progress output. (Restore and verify themselves: tests/integration/test_tools_state.py.)"""

from __future__ import annotations

import io
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from samzapy.progress import Progress
from samzapy.tools.state_storage import main as tool


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "job.properties"
    path.write_text(
        "job.name=t\n"
        "task.class=tools_tasks:KeyValueTask\n"
        "task.inputs=kafka.in\n"
        "systems.kafka.consumer.bootstrap.servers=127.0.0.1:1\n"  # never contacted by these tests
        "stores.kv.factory=rocksdb\n"
        "stores.kv.changelog=kafka.kv-changelog\n"
        "stores.local.factory=rocksdb\n"
        "stores.mem.factory=inmemory\n"
        "stores.mem.changelog=kafka.mem-changelog\n"
    )
    return path


def invoke(*args: Any) -> Any:
    return CliRunner().invoke(tool, [str(a) for a in args])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--store", "nope"], "store 'nope' is not in the config"),
        (["--store", "local"], "store 'local' has no changelog (stores.local.changelog): nothing to restore"),
        (["--store", "mem"], "store 'mem' is an in-memory store"),
        (["--engine", "bogus"], "'bogus' is not one of 'sequential', 'spark'"),
        (["--partition", "-1"], "-1 is not in the range x>=0"),
    ],
)
def test_restore_bad_arguments_exit_2_before_any_broker_connection(config, tmp_path, extra, message):
    result = invoke("restore", "--config-path", config, "--path", tmp_path / "out", *extra)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_one_line_errors_for_bad_input(config, tmp_path):
    result = invoke("restore", "--config-path", config, "--path", tmp_path / "out", "--store", "nope")
    assert (
        result.stderr == f"Error: store 'nope' is not in the config {config}: its stores are kv, local, mem\n"
    )


def test_a_missing_or_invalid_config_exits_2_naming_the_problem(tmp_path):
    missing = invoke("verify", "--config-path", f"file://{tmp_path}/nope.properties", "--path", tmp_path)
    assert missing.exit_code == 2 and "nope.properties' does not exist" in missing.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text("job.name=t\ntask.class=x:Y\ntask.inputs=kafka.in\nstores.s.factori=rocksdb\n")
    result = invoke("restore", f"--config-path={bad}", f"--path={tmp_path}")
    assert result.exit_code == 2 and "Unknown key 'stores.s.factori'" in result.stderr


def test_a_config_without_logged_stores_exits_2(tmp_path):
    path = tmp_path / "job.properties"
    path.write_text("job.name=t\ntask.class=x:Y\ntask.inputs=kafka.in\nstores.s.factory=rocksdb\n")
    result = invoke("restore", "--config-path", path, "--path", tmp_path / "out")
    assert result.exit_code == 2 and "has no logged RocksDB store" in result.stderr


def _spark_package(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """samzapy.spark.restore, or an empty stand-in where it cannot be imported."""
    try:
        import samzapy.spark.restore as package
    except ImportError:
        package = types.ModuleType("samzapy.spark.restore")
        package.__path__ = []  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "samzapy.spark.restore", package)
    return package


def test_engine_spark_says_it_is_not_available_while_the_spark_engine_is_missing(
    config, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "samzapy.spark.restore.bulk", None)  # import fails: not there
    monkeypatch.delattr(_spark_package(monkeypatch), "bulk", raising=False)
    result = invoke("restore", "--config-path", config, "--path", tmp_path / "out", "--engine", "spark")
    assert result.exit_code == 2
    assert "not available yet: the Spark engine arrives with the Spark issue" in result.stderr


def test_engine_spark_calls_the_spark_bulk_restore_when_present(config, tmp_path, monkeypatch):
    calls = []

    class Stats:
        records, bytes, total_s = 1234, 5_000_000, 2.5

    def restore_stores(config: Any, target_dir: Path, **options: Any) -> Stats:
        calls.append((config.source, target_dir, options))
        return Stats()

    fake = types.ModuleType("samzapy.spark.restore.bulk")
    fake.restore_stores = restore_stores  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "samzapy.spark.restore.bulk", fake)
    monkeypatch.setattr(_spark_package(monkeypatch), "bulk", fake, raising=False)
    out = tmp_path / "out"
    result = invoke(
        "restore",
        "--config-path",
        config,
        "--path",
        out,
        "--engine",
        "spark",
        "--store",
        "kv",
        "--partition",
        "1",
    )
    assert result.exit_code == 0, result.output
    assert calls == [(str(config), out, {"stores": ["kv"], "partitions": [1], "to_checkpoint": False})]
    assert "restored 1,234 records (5.0 MB) with Spark in 2.5s" in result.stdout


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_a_bar_on_a_terminal_and_plain_lines_otherwise(monkeypatch):
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr("samzapy.progress.time.monotonic", lambda: float(next(clock)))
    bar_out = FakeTerminal()
    bar = Progress("restore", stream=bar_out)
    bar.begin(1000)
    bar.add(500, 1_000_000)
    bar.skip(100)  # a local checkpoint made 100 planned records unnecessary
    bar.add(400, 1_000_000)
    bar.finish()
    drawn = bar_out.getvalue()
    assert drawn.startswith("\rrestore [" + "#" * 15 + "-" * 15 + "] 500/1,000 records (50%)")
    assert "900/900 records (100%), 2.0 MB" in drawn and "ETA 0s" in drawn and drawn.endswith("\n")

    plain_out = io.StringIO()
    plain = Progress("restore", stream=plain_out)
    plain.begin(200)
    plain.add(100, 10_000)
    plain.finish()
    lines = plain_out.getvalue().splitlines()
    assert lines[0].startswith("restore: 100/200 records (50%), 0.0 MB, 10 records/s")
    assert "\r" not in plain_out.getvalue()


def test_progress_never_begun_prints_nothing():
    out = io.StringIO()
    Progress("restore", stream=out).finish()
    assert out.getvalue() == ""


@pytest.mark.parametrize("module", ["samzapy.store_codec", "samzapy.progress"])
def test_the_tools_doctests_pass(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0

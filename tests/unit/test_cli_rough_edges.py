"""The command lines' rough edges (issue 31 items 5 and 6): -h, the option as typed in errors,
serde names, and a start that imports no Kafka client."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from samzapy.cli.app import main
from samzapy.cli.options import SERDE_NAMES
from samzapy.serdes import BUILTIN_SERDES
from samzapy.tools.read_rocksdb import main as read_rocksdb_tool
from samzapy.tools.state_storage import main as state_storage_tool


def test_the_cli_spells_the_builtin_serdes_as_samzapy_serdes_does():
    assert SERDE_NAMES == tuple(BUILTIN_SERDES)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (main, []),
        (main, ["run"]),
        (main, ["broker", "start"]),
        (main, ["examples", "copy"]),
        (read_rocksdb_tool, ["inspect"]),
        (state_storage_tool, ["restore"]),
    ],
)
def test_h_is_help_everywhere(tool, args):
    result = CliRunner().invoke(tool, [*args, "-h"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")


def test_an_options_error_names_the_spelling_the_user_typed(tmp_path):
    result = CliRunner().invoke(main, ["consume", "t", "--config"])
    assert result.exit_code == 2
    assert "Option '--config' requires an argument" in result.output
    bad = CliRunner().invoke(main, ["--verbose=maybe", "run"])
    assert bad.exit_code == 2


def test_help_and_a_config_error_import_no_kafka_client(tmp_path):
    (tmp_path / "bad.properties").write_text("job.name=x\ntask.comit.ms=5\n")
    probe = (
        "import sys\n"
        "from samzapy.cli.app import main\n"
        "for args in (['--help'], ['run', 'bad.properties']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('kafka', 'aiokafka', 'rocksdict', 'pyspark')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stdout + done.stderr

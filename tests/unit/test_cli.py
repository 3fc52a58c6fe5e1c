"""The ``samzapy`` command group: every subcommand is attached and answers --help."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from samzapy.cli import main

COMMANDS = ["broker", "checkpoint", "generate", "quickstart", "replay", "run"]


def test_every_command_is_listed():
    result = CliRunner().invoke(main, ["--help"])

    assert result.exit_code == 0
    for command in COMMANDS:
        assert f"  {command} " in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_answers_help(command):
    result = CliRunner().invoke(main, [command, "--help"])

    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_run_with_a_missing_config_file_exits_2_naming_it(tmp_path):
    missing = tmp_path / "nope.properties"

    result = CliRunner().invoke(main, ["run", str(missing)])

    assert result.exit_code == 2
    assert "nope.properties" in result.output

"""The command lines: every module of samzapy/cli/ imports, every command answers --help, and
the one error boundary maps errors to ``Error:`` lines and exit codes (2 bad request, 1 failure)."""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import samzapy.cli
from samzapy.cli import main
from samzapy.cli.boundary import Command, Group
from samzapy.cli.logs import VERBOSE_ONLY, ConsoleFormatter, JsonFormatter, KafkaRepeats, setup_logging
from samzapy.errors import BadArgumentError, ConfigError, KafkaSystemError
from samzapy.tools.read_rocksdb import main as read_rocksdb_tool
from samzapy.tools.state_storage import main as state_storage_tool

COMMANDS = [
    "broker",
    "checkpoint",
    "consume",
    "examples",
    "generate",
    "init",
    "produce",
    "quickstart",
    "replay",
    "run",
]
CLI_MODULES = [m.name for m in pkgutil.iter_modules(samzapy.cli.__path__, "samzapy.cli.")]


def test_every_command_is_listed():
    result = CliRunner().invoke(main, ["--help"])

    assert result.exit_code == 0
    for command in COMMANDS:
        assert f"  {command} " in result.output


def test_there_is_a_module_per_command():
    assert {f"samzapy.cli.{c}" for c in COMMANDS} <= set(CLI_MODULES)


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The argument paths of ``command`` and of every subcommand under it."""
    found = [path]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _commands(sub, (*path, name))
    return found


@pytest.mark.parametrize("name", CLI_MODULES)
def test_every_cli_module_imports_and_its_commands_answer_help(name):
    module = importlib.import_module(name)
    commands = [
        value for value in vars(module).values() if isinstance(value, click.Command) and value.callback
    ]
    own = [c for c in commands if c.callback.__module__ == name]  # type: ignore[union-attr]
    if name.rsplit(".", 1)[1] in COMMANDS:
        assert own, f"{name} defines no command"
    for command in own:
        for path in _commands(command):
            result = CliRunner().invoke(command, [*path, "--help"])
            assert result.exit_code == 0, (name, path, result.output)
            assert "Usage:" in result.output


@pytest.mark.parametrize("tool", [state_storage_tool, read_rocksdb_tool])
def test_the_tools_answer_help_for_every_command(tool):
    for path in _commands(tool):
        result = CliRunner().invoke(tool, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)


def test_run_with_a_missing_config_file_exits_2_naming_it(tmp_path):
    missing = tmp_path / "nope.properties"

    result = CliRunner().invoke(main, ["run", str(missing)])

    assert result.exit_code == 2
    assert "nope.properties" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run"], "Error: give the job's config: CONFIG or --config-path CONFIG"),
        (["run", "a.properties", "--config-path", "b.properties"], "Error: two configs given"),
        (["run", "x.properties", "--container-id", "-1"], "Error: Invalid value for '--container-id'"),
        (["checkpoint", "set", "--config-path", "x", "--to-offset", "bad"], "is not SSP=OFFSET"),
        (["generate", "pageviews", "--count", "-3"], "Error: Invalid value for '--count'"),
    ],
)
def test_a_bad_argument_exits_2_with_an_error_line(args, message):
    result = CliRunner().invoke(main, args)

    assert result.exit_code == 2, result.output
    assert message in result.stderr


def _bad_config(tmp_path: Path) -> Path:
    path = tmp_path / "job.properties"
    path.write_text("job.name=x\ntask.class=samzapy.jobs.pageview_filter:PageViewFilterTask\n")
    path.write_text(path.read_text() + "task.inputs=kafka.in\ntask.commit.ms=-5\n")
    return path


@pytest.mark.parametrize("form", ["positional", "--config-path", "file-uri"])
def test_a_config_error_exits_2_naming_file_and_line(tmp_path, form):
    path = _bad_config(tmp_path)
    args = {
        "positional": [str(path)],
        "--config-path": ["--config-path", str(path)],
        "file-uri": ["--config-path", path.as_uri()],
    }[form]

    result = CliRunner().invoke(main, ["run", *args])

    assert result.exit_code == 2
    assert result.stderr.startswith("Error: 1 problem in ")
    assert f"Invalid value '-5' for 'task.commit.ms' ({path}:4)" in result.stderr
    assert "Traceback" not in result.output


def _boundary_cli(raise_: BaseException) -> click.Group:
    @click.group(cls=Group)
    def cli() -> None:
        pass

    @cli.command()
    def go() -> None:
        raise raise_

    return cli


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (ConfigError("bad key 'x' (job.properties:3)"), 2, "Error: bad key 'x' (job.properties:3)\n"),
        (BadArgumentError("no store 'y'"), 2, "Error: no store 'y'\n"),
        (KafkaSystemError("broker at a:1 unreachable"), 1, "Error: broker at a:1 unreachable\n"),
    ],
)
def test_the_boundary_maps_samzapy_errors_to_exit_codes(error, code, line):
    result = CliRunner().invoke(_boundary_cli(error), ["go"])

    assert result.exit_code == code
    assert result.stderr == line


def test_an_unexpected_exception_is_one_line_with_its_type_and_where_it_was_raised():
    result = CliRunner().invoke(_boundary_cli(RuntimeError("boom")), ["go"])

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: RuntimeError: boom (raised at test_cli.py:")
    assert result.stderr.endswith(" in go); run with -v for the traceback\n")
    assert result.stderr.count("\n") == 1


def test_a_command_run_alone_has_the_same_boundary():
    @click.command(cls=Command)
    def alone() -> None:
        raise ConfigError("bad")

    result = CliRunner().invoke(alone, [])

    assert (result.exit_code, result.stderr) == (2, "Error: bad\n")


def _record(exc_info: bool, **extra: object) -> logging.LogRecord:
    try:
        raise ValueError("inner")
    except ValueError:
        try:
            raise RuntimeError("outer")  # noqa: B904 - a chained exception on purpose
        except RuntimeError:
            import sys

            info = sys.exc_info() if exc_info else None
    record = logging.LogRecord("samzapy.x", logging.ERROR, __file__, 1, "it failed", None, info)
    record.__dict__.update(extra)
    return record


def test_the_console_shows_one_line_per_record_and_tracebacks_only_when_verbose():
    quiet = ConsoleFormatter(verbose=False).format(_record(exc_info=True))
    loud = ConsoleFormatter(verbose=True).format(_record(exc_info=True))

    assert quiet.endswith("it failed (the traceback: run with -v, or see --log-file)")
    assert "\n" not in quiet
    assert "Traceback" in loud and "During handling of the above exception" in loud


@contextmanager
def fresh_root_logger():
    """The root logger as in a fresh process (pytest's capture handlers set aside)."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, logging.getLogger("kafka").level
    root.handlers = []
    try:
        yield root
    finally:
        setup_logging()  # removes what the test set up
        root.handlers, root.level = saved[0], saved[1]
        logging.getLogger("kafka").setLevel(saved[2])


def test_setup_logging_keeps_verbose_only_records_off_the_console_but_in_the_log_file(tmp_path, capsys):
    log_file = tmp_path / "logs" / "samzapy.log"
    with fresh_root_logger():
        setup_logging(False, log_file=log_file)
        logger = logging.getLogger("samzapy.test")
        logger.info("starting")
        logger.error("the command failed: boom", exc_info=RuntimeError("boom"), extra={VERBOSE_ONLY: True})

    err = capsys.readouterr().err
    assert "starting" in err and "boom" not in err
    written = log_file.read_text()
    assert "starting" in written and "the command failed: boom" in written and "RuntimeError: boom" in written


def test_setup_logging_again_replaces_its_handlers(tmp_path):
    with fresh_root_logger() as root:
        setup_logging(False, log_file=tmp_path / "a.log")
        setup_logging(True, level=logging.WARNING)

        assert len(root.handlers) == 1
        assert root.level == logging.DEBUG
        assert logging.getLogger("kafka").level == logging.INFO


def test_the_kafka_clients_repeats_of_one_problem_are_one_line_until_the_window_passes() -> None:
    repeats = KafkaRepeats(window_s=0.2)

    def record(name: str, msg: str, level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, msg, ("node-1",), None)

    passed = [repeats.filter(record("kafka.conn", "%s: connect attempt failed")) for _ in range(50)]
    assert passed == [True] + [False] * 49
    assert repeats.filter(record("kafka.client", "%s: node not ready"))  # another problem: its own line
    assert repeats.filter(record("samzapy.container", "%s: not kafka"))  # samzapy's lines are never held
    assert repeats.filter(record("kafka.conn", "%s: connect attempt failed", logging.INFO))  # below WARNING
    time.sleep(0.25)
    late = record("kafka.conn", "%s: connect attempt failed")
    assert (
        repeats.filter(late)
        and late.getMessage() == "node-1: connect attempt failed (and 49 more like it in the last 0 s)"
    )


def test_json_log_lines_are_json_with_the_traceback(tmp_path) -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        record = logging.LogRecord("samzapy.x", logging.ERROR, __file__, 1, "failed %d", (3,), sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "ERROR" and line["logger"] == "samzapy.x" and line["message"] == "failed 3"
    assert line["exception"].startswith("Traceback") and "ValueError: bad" in line["exception"]
    assert line["time"].endswith("+00:00")

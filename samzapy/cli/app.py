"""The ``samzapy`` command group: one subcommand per module of this package."""

from __future__ import annotations

from pathlib import Path

import click

from samzapy.cli.boundary import Group
from samzapy.cli.broker import broker
from samzapy.cli.checkpoint import checkpoint
from samzapy.cli.consume import consume
from samzapy.cli.describe import describe
from samzapy.cli.examples import examples_group
from samzapy.cli.generate import generate
from samzapy.cli.init import init
from samzapy.cli.logs import setup_logging
from samzapy.cli.options import logging_options
from samzapy.cli.produce import produce
from samzapy.cli.quickstart import quickstart
from samzapy.cli.replay import replay
from samzapy.cli.run import run


@click.group(cls=Group)
@logging_options
@click.version_option(package_name="samzapy")
def main(verbose: bool, log_file: Path | None, log_format: str, log_config: Path | None) -> None:
    """samzapy: a Python stream processor in the Apache Samza mould.

    Exit codes: 0 done, 1 a failure (one "Error:" line says what and what to do; -v or
    --log-file for the traceback), 2 a bad argument or configuration.
    """
    setup_logging(verbose, log_file=log_file, log_format=log_format, log_config=log_config)


for _command in (
    run,
    broker,
    checkpoint,
    generate,
    produce,
    consume,
    quickstart,
    replay,
    init,
    examples_group,
    describe,
):
    main.add_command(_command)

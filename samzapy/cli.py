"""The ``samzapy`` command: run a job, manage the dev broker, generate example data."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from samzapy.errors import ConfigError, SamzapyError

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def setup_logging(verbose: bool = False) -> None:
    """Log to stderr: INFO by default (DEBUG with ``-v``); kafka-python's chatter only on WARNING."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, stream=sys.stderr
    )
    logging.getLogger("kafka").setLevel(logging.WARNING if not verbose else logging.INFO)


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level.")
@click.version_option(package_name="samzapy")
def main(verbose: bool) -> None:
    """samzapy: a Python stream processor in the Apache Samza mould."""
    setup_logging(verbose)


@main.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--config", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key.")
@click.option(
    "--container-id",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Which container of job.container.count this process is.",
)
@click.option(
    "--exit-at-end",
    is_flag=True,
    help="Stop (with a final commit) once every input is processed up to the end it had at start.",
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a JSON metrics snapshot here at every commit and at exit.",
)
def run(
    config_path: str,
    overrides: tuple[str, ...],
    container_id: int,
    exit_at_end: bool,
    metrics_file: Path | None,
) -> None:
    """Run the job described by CONFIG (a .properties file)."""
    from samzapy.config import load_config, parse_job_config
    from samzapy.container.run_loop import Container

    try:
        config = load_config(config_path, overrides)
        job = parse_job_config(config, check_task_class=True)
    except ConfigError as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(2)
    try:
        code = Container(
            job, container_id=container_id, exit_at_end=exit_at_end, metrics_path=metrics_file
        ).run()
    except ConfigError as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(2)
    except SamzapyError as error:
        click.echo(f"Error: {error}", err=True)
        sys.exit(1)
    sys.exit(code)


def _attach_optional_commands() -> None:
    from samzapy.cli_broker import broker
    from samzapy.cli_checkpoint import checkpoint
    from samzapy.cli_replay import replay
    from samzapy.generate import generate
    from samzapy.quickstart import quickstart

    main.add_command(broker)
    main.add_command(checkpoint)
    main.add_command(generate)
    main.add_command(quickstart)
    main.add_command(replay)


_attach_optional_commands()

"""``samzapy broker``: start, stop and check the embedded development broker.

A thin click layer over :mod:`samzapy.kafka.broker`. A broker that cannot start raises
:class:`~samzapy.errors.BrokerError` (``Error:``, exit 1, :mod:`samzapy.cli.boundary`).
"""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from samzapy.cli.boundary import Group
from samzapy.errors import BrokerError
from samzapy.kafka import broker as dev_broker

_STATE_DIR = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the broker's pid file and log live (default: $SAMZAPY_HOME/broker or ~/.samzapy/broker).",
)


@click.group("broker", cls=Group)
def broker() -> None:
    """The embedded development broker (Tansu, memory-only): for development and tests."""


@broker.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=dev_broker.DEFAULT_PORT,
    show_default=True,
    envvar="SAMZAPY_BROKER_PORT",
    show_envvar=True,
    help="TCP port on 127.0.0.1 (also what 'embedded' in a job's config connects to).",
)
@_STATE_DIR
@click.pass_context
def start(ctx: click.Context, port: int, state_dir: Path | None) -> None:
    """Start the broker in the background (or report the one already running)."""
    already = dev_broker.status(state_dir)
    given = ctx.get_parameter_source("port")
    if already is not None and given is not ParameterSource.DEFAULT and already.port != port:
        source = "--port" if given is ParameterSource.COMMANDLINE else "SAMZAPY_BROKER_PORT"
        msg = (
            f"a broker already runs at {already.bootstrap_servers} (pid {already.pid}), not on port "
            f"{port} ({source}): use that one, or stop it first with: samzapy broker stop"
        )
        raise BrokerError(msg)
    info = dev_broker.start(port=port, state_dir=state_dir)
    verb = "already running" if already is not None else "started"
    click.echo(f"broker {verb} at {info.bootstrap_servers} (pid {info.pid}, log {info.log_path})")
    click.echo("data is kept in memory only: everything is lost when the broker stops")


@broker.command()
@_STATE_DIR
def stop(state_dir: Path | None) -> None:
    """Stop the broker (its data is lost)."""
    info = dev_broker.stop(state_dir)
    if info is None:
        click.echo("no broker is running")
    else:
        click.echo(f"stopped the broker at {info.bootstrap_servers} (pid {info.pid})")


@broker.command()
@_STATE_DIR
def status(state_dir: Path | None) -> None:
    """Say whether the broker runs; exit status 1 when it does not."""
    info = dev_broker.status(state_dir)
    if info is None:
        msg = "no broker is running (start one with: samzapy broker start)"
        raise click.ClickException(msg)
    click.echo(f"broker running at {info.bootstrap_servers} (pid {info.pid}, log {info.log_path})")

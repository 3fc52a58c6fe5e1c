"""``samzapy quickstart``: the page-view counter end to end (:mod:`samzapy.quickstart`)."""

from __future__ import annotations

import click

from samzapy.cli.boundary import Command


@click.command(cls=Command)
@click.option("--count", default=20_000, show_default=True, type=click.IntRange(min=1), help="Page views.")
@click.option("--users", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--hours", default=4.0, show_default=True, type=click.FloatRange(min=0.01))
@click.option("--top", default=3, show_default=True, type=click.IntRange(min=1), help="Users shown per hour.")
@click.option("--seed", default=42, show_default=True)
@click.option("--keep-broker", is_flag=True, help="Leave the broker running afterwards (prints its address).")
def quickstart(count: int, users: int, hours: float, top: int, seed: int, keep_broker: bool) -> None:
    """Run the page-view counter end to end on a fresh embedded broker and show its result."""
    from samzapy.quickstart import QuickstartSpec, run_quickstart

    run_quickstart(QuickstartSpec(count, users, hours, top, seed, keep_broker), echo=click.echo)

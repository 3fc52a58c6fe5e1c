"""``samzapy produce TOPIC``: send lines of text (stdin or ``--file``) to a topic, one record each.

A thin click layer over :func:`samzapy.kafka.topic_io.produce_lines`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from samzapy.cli.boundary import Command
from samzapy.cli.options import bootstrap_options, broker_address
from samzapy.kafka.topic_io import SERDE_NAMES, LineFormat, produce_lines

_EPILOG = """\b
Examples:
  echo '{"user": "ann", "page": "/a"}' | samzapy produce pageviews --key-field user --partitions 4
  samzapy produce words --serde string --key k1 --file words.txt --header source=test
"""


def _headers(values: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    headers = []
    for value in values:
        name, eq, text = value.partition("=")
        if not eq or not name:
            msg = f"'{value}' is not NAME=VALUE"
            raise click.BadParameter(msg, param_hint="--header")
        headers.append((name, text.encode("utf-8")))
    return tuple(headers)


@click.command(cls=Command, epilog=_EPILOG)
@click.argument("topic")
@click.option(
    "--file",
    "path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the lines from this file instead of stdin.",
)
@click.option(
    "--serde",
    type=click.Choice(SERDE_NAMES),
    default="json",
    show_default=True,
    help="The value serde: json lines are parsed (and refused when they are not JSON).",
)
@click.option("--key-field", metavar="F", help="Key each record by this field of its JSON value.")
@click.option("--key", metavar="K", help="Key every record by K.")
@click.option("--key-serde", type=click.Choice(SERDE_NAMES), default="string", show_default=True)
@click.option("--header", "headers", multiple=True, metavar="NAME=VALUE", help="Add a header (repeatable).")
@click.option("--partition", type=click.IntRange(min=0), help="Send every record to this partition.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="Create the topic with N partitions if it does not exist (else a missing topic is an error).",
)
@bootstrap_options
def produce(
    topic: str,
    path: Path | None,
    serde: str,
    key_field: str | None,
    key: str | None,
    key_serde: str,
    headers: tuple[str, ...],
    partition: int | None,
    partitions: int | None,
    bootstrap: str | None,
    config_path: str | None,
) -> None:
    """Send each line of stdin (or --file) to TOPIC as one record; empty lines are skipped."""
    if key_field and key is not None:
        msg = "give --key-field or --key, not both"
        raise click.UsageError(msg)
    if key_field and serde != "json":
        msg = "--key-field reads a field of a JSON value: use it with --serde json"
        raise click.UsageError(msg)
    fmt = LineFormat(serde, key_serde, key_field, key, _headers(headers), partition)
    servers = broker_address(bootstrap, config_path, "producer")
    if path is None:
        sent = produce_lines(servers, topic, sys.stdin, fmt, source="stdin", partitions=partitions)
    else:
        with path.open(encoding="utf-8") as lines:
            sent = produce_lines(servers, topic, lines, fmt, source=str(path), partitions=partitions)
    click.echo(f"produced {sent} records to '{topic}' on {servers}", err=True)

"""``samzapy produce [TOPIC]``: send lines of text (stdin or ``--file``) to a topic, one record each.

A thin click layer over :func:`samzapy.kafka.topic_io.produce_lines` (imported when the command
runs: the Kafka client is not needed for ``--help``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from samzapy.cli.boundary import Command
from samzapy.cli.options import SERDE_NAMES, bootstrap_options, broker_address, topic_and_codecs

if TYPE_CHECKING:
    from samzapy.kafka.topic_io import LineFormat

_EPILOG = """\b
Examples:
  echo '{"user": "ann", "page": "/a"}' | samzapy produce pageviews --key-field user --partitions 4
  samzapy produce words --serde string --key k1 --file words.txt --header source=test
  printf 'ann|NULL\\n' | samzapy produce profiles --key-separator '|' --null-value NULL   (a tombstone)
  samzapy produce --config job.properties --stream pageviews --file views.jsonl --timestamp-field ts
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


def _check_key_options(key_field: str | None, key: str | None, key_separator: str | None) -> None:
    options = (("--key-field", key_field), ("--key", key), ("--key-separator", key_separator))
    given = [name for name, value in options if value is not None]
    if len(given) > 1:
        msg = f"give one of --key-field, --key and --key-separator, not {' and '.join(given)}"
        raise click.UsageError(msg)


@click.command(cls=Command, epilog=_EPILOG)
@click.argument("topic", required=False)
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
@click.option("--key-separator", metavar="SEP", help="Each line is KEY SEP VALUE.")
@click.option("--key-serde", type=click.Choice(SERDE_NAMES), default="string", show_default=True)
@click.option(
    "--null-value",
    metavar="TEXT",
    help="Send a value equal to TEXT as a tombstone (a null value); needs --key or --key-separator.",
)
@click.option(
    "--timestamp-field",
    metavar="F",
    help="Each record's timestamp from this field of its JSON value (ms since the epoch or ISO 8601).",
)
@click.option("--header", "headers", multiple=True, metavar="NAME=VALUE", help="Add a header (repeatable).")
@click.option("--partition", type=click.IntRange(min=0), help="Send every record to this partition.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="Create the topic with N partitions if it does not exist (else a missing topic is an error).",
)
@click.option(
    "--stream",
    metavar="S",
    help="With --config: use the job's key and msg serdes of stream S (Avro and its own classes "
    "included); TOPIC defaults to S.",
)
@bootstrap_options
@click.pass_context
def produce(
    ctx: click.Context,
    topic: str | None,
    path: Path | None,
    serde: str,
    key_field: str | None,
    key: str | None,
    key_separator: str | None,
    key_serde: str,
    null_value: str | None,
    timestamp_field: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    partitions: int | None,
    stream: str | None,
    bootstrap: str | None,
    config_path: str | None,
) -> None:
    """Send each line of stdin (or --file) to TOPIC as one record; empty lines are skipped."""
    from samzapy.kafka.topic_io import LineFormat, produce_lines

    _check_key_options(key_field, key, key_separator)
    typed = ParameterSource.COMMANDLINE
    explicit = {n for n in ("serde", "key_serde") if ctx.get_parameter_source(n) is typed}
    topic, key_codec, value_codec = topic_and_codecs(topic, stream, config_path, serde, key_serde, explicit)
    needs_json = [o for o, v in (("--key-field", key_field), ("--timestamp-field", timestamp_field)) if v]
    if needs_json and value_codec.reads != "json":
        msg = f"{needs_json[0]} reads a field of a JSON value: {value_codec.named} takes no JSON"
        raise click.UsageError(msg)
    fmt: LineFormat = LineFormat(
        value=value_codec,
        key_codec=key_codec,
        key_field=key_field,
        key=key,
        key_separator=key_separator,
        null_value=null_value,
        timestamp_field=timestamp_field,
        headers=_headers(headers),
        partition=partition,
    )
    servers = broker_address(bootstrap, config_path, "producer")
    if path is None:
        sent = produce_lines(servers, topic, sys.stdin, fmt, source="stdin", partitions=partitions)
    else:
        with path.open(encoding="utf-8") as lines:
            sent = produce_lines(servers, topic, lines, fmt, source=str(path), partitions=partitions)
    click.echo(f"produced {sent} records to '{topic}' on {servers}", err=True)

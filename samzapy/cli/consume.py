"""``samzapy consume TOPIC``: print a topic's records with their partition and offset.

A thin click layer over :func:`samzapy.kafka.topic_io.read_records`. Without ``--follow`` it
stops at the end of every partition (the true end, even on the dev broker); with it, it waits
for new records until ``--max`` or Ctrl-C.
"""

from __future__ import annotations

import click

from samzapy.cli.boundary import Command
from samzapy.cli.options import bootstrap_options, broker_address
from samzapy.kafka.topic_io import SERDE_NAMES, OutputFormat, ReadSpec, format_record, read_records

_EPILOG = """\b
Output (text): PARTITION:OFFSET<tab>KEY<tab>VALUE[<tab>HEADERS], one record a line.
Output (json): {"topic", "partition", "offset", "timestamp", "key", "value"[, "headers"]}.
Examples:
  samzapy consume pageview-counts --from-beginning --max 5
  samzapy consume pageviews --from-beginning --format json --headers
"""


@click.command(cls=Command, epilog=_EPILOG)
@click.argument("topic")
@click.option(
    "--from-beginning", is_flag=True, help="Start at each partition's first record (default: its end)."
)
@click.option("--max", "max_records", type=click.IntRange(min=0), help="Stop after N records.")
@click.option("--follow", is_flag=True, help="Keep waiting for new records (stop with Ctrl-C or --max).")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--serde",
    type=click.Choice(SERDE_NAMES),
    default="json",
    show_default=True,
    help="Decode values with this serde (values that do not fit are shown as text).",
)
@click.option("--key-serde", type=click.Choice(SERDE_NAMES), default="string", show_default=True)
@click.option("--headers", is_flag=True, help="Show each record's headers.")
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    help="Only this partition (repeatable).",
)
@bootstrap_options
def consume(
    topic: str,
    from_beginning: bool,
    max_records: int | None,
    follow: bool,
    output: str,
    serde: str,
    key_serde: str,
    headers: bool,
    partitions: tuple[int, ...],
    bootstrap: str | None,
    config_path: str | None,
) -> None:
    """Print TOPIC's records, one a line, with partition and offset."""
    servers = broker_address(bootstrap, config_path, "consumer")
    spec = ReadSpec(from_beginning, follow, max_records, partitions or None)
    fmt = OutputFormat(output, serde, key_serde, headers)
    count = 0
    try:
        for record in read_records(servers, topic, spec):
            click.echo(format_record(record, fmt))
            count += 1
    except KeyboardInterrupt:
        pass
    hint = "" if count or from_beginning or follow else " (reading from the end: add --from-beginning)"
    click.echo(f"{count} records from '{topic}' on {servers}{hint}", err=True)

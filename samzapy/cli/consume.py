"""``samzapy consume TOPIC``: print a topic's records with their partition and offset.

A thin click layer over :func:`samzapy.kafka.topic_io.read_records` (imported when the command
runs). Without ``--follow`` it
stops at the end of every partition (the true end, even on the dev broker); with it, it waits
for new records until ``--max`` or Ctrl-C.
"""

from __future__ import annotations

import click
from click.core import ParameterSource

from samzapy.cli.boundary import Command
from samzapy.cli.options import SERDE_NAMES, bootstrap_options, broker_address, topic_and_codecs

_EPILOG = """\b
Output (text): PARTITION:OFFSET<tab>KEY<tab>VALUE[<tab>HEADERS], one record a line.
Output (json): {"topic", "partition", "offset", "timestamp", "key", "value"[, "headers"]}.
Examples:
  samzapy consume pageview-counts --from-beginning --max 5
  samzapy consume pageviews --from-beginning --format json --headers
  samzapy consume --config job.properties --stream pageviews --from-beginning   (the job's serdes)
"""


@click.command(cls=Command, epilog=_EPILOG)
@click.argument("topic", required=False)
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
@click.option(
    "--stream",
    metavar="S",
    help="With --config: decode with the job's key and msg serdes of stream S (Avro and its own "
    "classes included); TOPIC defaults to S.",
)
@bootstrap_options
@click.pass_context
def consume(
    ctx: click.Context,
    topic: str | None,
    from_beginning: bool,
    max_records: int | None,
    follow: bool,
    output: str,
    serde: str,
    key_serde: str,
    headers: bool,
    partitions: tuple[int, ...],
    stream: str | None,
    bootstrap: str | None,
    config_path: str | None,
) -> None:
    """Print TOPIC's records, one a line, with partition and offset."""
    from samzapy.kafka.topic_io import OutputFormat, ReadSpec, format_record, read_records

    typed = ParameterSource.COMMANDLINE
    explicit = {n for n in ("serde", "key_serde") if ctx.get_parameter_source(n) is typed}
    topic, key_codec, value_codec = topic_and_codecs(topic, stream, config_path, serde, key_serde, explicit)
    servers = broker_address(bootstrap, config_path, "consumer")
    spec = ReadSpec(from_beginning, follow, max_records, partitions or None)
    fmt = OutputFormat(output, value_codec, key_codec, headers)
    count = 0
    try:
        for record in read_records(servers, topic, spec):
            click.echo(format_record(record, fmt))
            count += 1
    except KeyboardInterrupt:
        pass
    hint = "" if count or from_beginning or follow else " (reading from the end: add --from-beginning)"
    click.echo(f"{count} records from '{topic}' on {servers}{hint}", err=True)

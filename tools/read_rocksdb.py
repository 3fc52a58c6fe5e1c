r"""``read-rocksdb-tool``: read a job's RocksDB store — while the job runs, if need be.

Samza's ``read-rocksdb-tool.sh`` flags work as they are::

    read-rocksdb-tool inspect --config-path=file:///path/to/job.properties \
        --db-path=/tmp/state/test-state/Partition_0 --db-name=test-state --string-key=a,b,c

and more: ``--json-key``/``--hex-key``, ``--format json``, ``scan``, ``count`` and ``stats``,
every partition at once. ``--config-path`` may also name a pipeline (``app.py``, as ``samzapy
run`` takes it: :mod:`samzapy.tools.job_source`). Stores are opened as RocksDB secondary
instances (never the job's lock); see :mod:`samzapy.tools.reader`. The work is done by
:class:`~samzapy.tools.reader.RocksDbKeyValueReader`; this module only parses and prints.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from samzapy.cli.boundary import Group
from samzapy.cli.logs import setup_logging
from samzapy.cli.options import logging_options
from samzapy.store_codec import KEY_FORMATS, default_format, parse_key, parse_keys, render_text, to_json
from samzapy.tools.common import BadInputError
from samzapy.tools.job_source import config_path_option, load_tool_job
from samzapy.tools.reader import DbStats, RocksDbKeyValueReader

F = TypeVar("F", bound=Callable[..., Any])
_FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one JSON object per line.",
)


def _store_options(func: F) -> F:
    for option in reversed(
        [
            config_path_option,
            click.option(
                "--db-path",
                required=True,
                type=click.Path(path_type=Path),
                help="The job's store base directory (job.logged.store.base.dir), a store's "
                "directory, or one Partition_<N> database.",
            ),
            click.option("--db-name", metavar="STORE", help="The store (default: the config's only store)."),
            click.option(
                "--partition",
                type=click.IntRange(min=0),
                help="Read only this partition (default: every partition found).",
            ),
            click.option(
                "-q",
                "--quiet",
                is_flag=True,
                help="Do not print the note about the job's cache (it is printed once per store anyway).",
            ),
        ]
    ):
        func = option(func)
    return func


@click.group(cls=Group)
@logging_options
def main(verbose: bool, log_file: Path | None, log_format: str, log_config: Path | None) -> None:
    """Read a job's RocksDB store, live or not, with the store's own serdes.

    Exit codes: 0 done, 1 a failure (a damaged store included: nothing partial is shown as
    complete), 2 a bad argument or configuration.
    """
    setup_logging(
        verbose, level=logging.WARNING, log_file=log_file, log_format=log_format, log_config=log_config
    )


@contextmanager
def _open(
    config_path: str, db_path: Path, db_name: str | None, partition: int | None, quiet: bool
) -> Iterator[RocksDbKeyValueReader]:
    """The reader; after a successful read, the note on what it cannot see (stderr, once)."""
    with RocksDbKeyValueReader(db_name, db_path, load_tool_job(config_path), partition) as reader:
        yield reader
        if not quiet and _first_note(reader):
            _note(reader)


def _first_note(reader: RocksDbKeyValueReader) -> bool:
    """Whether the note on this job's store is new on this machine; remembers that it was said.

    A marker per job, store and cache size under ``$SAMZAPY_HOME/notes`` (``~/.samzapy``): the
    note says nothing new on a second call, but a changed cache size is worth saying again.
    """
    store, job = reader.store, reader.job
    home = os.environ.get("SAMZAPY_HOME")
    notes = (Path(home) if home else Path.home() / ".samzapy") / "notes" / "read-rocksdb-tool"
    marker = notes / f"{job.job_name}-{job.job_id}.{store.name}.cache-{store.object_cache_size}"
    if marker.exists():
        return False
    try:
        notes.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # nowhere to remember it: say it on every call rather than never
    return True


def _note(reader: RocksDbKeyValueReader) -> None:
    store, job = reader.store, reader.job
    parts = ", ".join(str(db.partition) for db in reader.dbs)
    text = (
        f"note: store '{store.name}' read as a RocksDB secondary instance (partitions {parts}), no lock taken"
    )
    if store.object_cache_size:
        text += (
            f"; writes still in the job's object cache (stores.{store.name}.object.cache.size="
            f"{store.object_cache_size}) are not visible until written down at commit "
            f"(task.commit.ms={job.commit_ms}) or when {store.write_batch_size} are dirty: "
            f"set stores.{store.name}.object.cache.size=0 or lower task.commit.ms to see writes sooner"
        )
    click.echo(text + " (said once per store)", err=True)


@main.command()
@_store_options
@click.option(
    "--string-key", "string_keys", multiple=True, metavar="A,B,...", help="String keys, comma-separated."
)
@click.option("--integer-key", "integer_keys", multiple=True, metavar="1,2,...", help="32-bit integer keys.")
@click.option("--long-key", "long_keys", multiple=True, metavar="1,2,...", help="64-bit integer keys.")
@click.option("--json-key", "json_keys", multiple=True, metavar="JSON", help="One key as JSON (repeatable).")
@click.option("--hex-key", "hex_keys", multiple=True, metavar="AB01,...", help="Stored key bytes in hex.")
@_FORMAT
def inspect(
    config_path: str,
    db_path: Path,
    db_name: str | None,
    partition: int | None,
    quiet: bool,
    string_keys: tuple[str, ...],
    integer_keys: tuple[str, ...],
    long_keys: tuple[str, ...],
    json_keys: tuple[str, ...],
    hex_keys: tuple[str, ...],
    fmt: str,
) -> None:
    """Print the value of each key (a missing key prints as missing, null in JSON)."""
    given = {
        "string": string_keys,
        "integer": integer_keys,
        "long": long_keys,
        "json": json_keys,
        "hex": hex_keys,
    }
    keys = [
        (kind, key)
        for kind, texts in given.items()
        for text in texts
        for key in parse_keys(kind, text, f"--{kind}-key")
    ]
    if not keys:
        msg = "give at least one key: --string-key, --integer-key, --long-key, --json-key or --hex-key"
        raise BadInputError(msg)
    with _open(config_path, db_path, db_name, partition, quiet) as reader:
        found = [(key, *reader.find(key, kind)) for kind, key in keys]
        several = len(reader.dbs) > 1
    for key, part, value in found:
        if fmt == "json":
            click.echo(to_json({"key": key, "value": value, "partition": part}))
        else:
            shown = "<missing>" if part is None else render_text(value)
            where = f" (partition {part})" if several and part is not None else ""
            click.echo(f"{render_text(key)}: {shown}{where}")


def _range_options(func: F) -> F:
    for option in reversed(
        [
            click.option("--from", "from_key", metavar="KEY", help="First key (inclusive)."),
            click.option("--to", "to_key", metavar="KEY", help="End key (exclusive)."),
            click.option(
                "--prefix", metavar="KEY", help="Keys whose serialised bytes start with this key's."
            ),
            click.option(
                "--key-type",
                type=click.Choice(KEY_FORMATS),
                help="How --from/--to/--prefix are read (default: from the store's key serde).",
            ),
        ]
    ):
        func = option(func)
    return func


def _bounds(reader: RocksDbKeyValueReader, key_type: str | None, *texts: str | None) -> tuple[str, list[Any]]:
    kind = key_type or default_format(reader.job, reader.store)
    return kind, [None if t is None else parse_key(kind, t, f"--key-type {kind}") for t in texts]


@main.command()
@_store_options
@_range_options
@click.option("--limit", type=click.IntRange(min=0), help="At most this many entries.")
@_FORMAT
def scan(
    config_path: str,
    db_path: Path,
    db_name: str | None,
    partition: int | None,
    quiet: bool,
    from_key: str | None,
    to_key: str | None,
    prefix: str | None,
    key_type: str | None,
    limit: int | None,
    fmt: str,
) -> None:
    """Print entries in key order (serialised-key order, across partitions)."""
    with _open(config_path, db_path, db_name, partition, quiet) as reader:
        kind, (start, end, pre) = _bounds(reader, key_type, from_key, to_key, prefix)
        several = len(reader.dbs) > 1  # as inspect: each entry says its partition
        for part, key, value in reader.entries(start, end, pre, limit, kind):
            if fmt == "json":
                click.echo(to_json({"key": key, "value": value, "partition": part}))
            else:
                where = f" (partition {part})" if several else ""
                click.echo(f"{render_text(key)}: {render_text(value)}{where}")


@main.command()
@_store_options
@_range_options
def count(
    config_path: str,
    db_path: Path,
    db_name: str | None,
    partition: int | None,
    quiet: bool,
    from_key: str | None,
    to_key: str | None,
    prefix: str | None,
    key_type: str | None,
) -> None:
    """Print the exact number of keys (in the range)."""
    with _open(config_path, db_path, db_name, partition, quiet) as reader:
        kind, (start, stop, prefix_key) = _bounds(reader, key_type, from_key, to_key, prefix)
        click.echo(reader.count(start, stop, prefix_key, kind=kind))


@main.command()
@_store_options
@_FORMAT
def stats(
    config_path: str, db_path: Path, db_name: str | None, partition: int | None, quiet: bool, fmt: str
) -> None:
    """Print the statistics of each partition's database.

    Keys (RocksDB's estimate), size on disk, SST files, memtable size, the changelog offset the
    store reflects (its newest local checkpoint) and whether a live process has it open.
    """
    with _open(config_path, db_path, db_name, partition, quiet) as reader:
        found = reader.stats()
    for item in found:
        if fmt == "json":
            click.echo(to_json({**item.__dict__, "path": str(item.path)}))
        else:
            click.echo(_stats_text(item))


def _stats_text(s: DbStats) -> str:
    offset = "none (no local checkpoint)" if s.changelog_offset is None else str(s.changelog_offset)
    live = {True: "yes (opened read-write by a live process)", False: "no", None: "unknown"}[s.live]
    return (
        f"partition {s.partition} ({s.path}):\n"
        f"  keys (estimate)   {s.estimated_keys if s.estimated_keys is not None else '?'}\n"
        f"  size on disk      {s.size_bytes:,} bytes\n"
        f"  SST files         {s.sst_files} ({s.sst_bytes:,} bytes)\n"
        f"  memtable          {s.memtable_bytes if s.memtable_bytes is not None else '?'} bytes\n"
        f"  changelog offset  {offset} ({s.local_checkpoints} local checkpoints)\n"
        f"  in use by a job   {live}"
    )

"""``state-storage-tool export`` and ``reshard``: a job's state as data, with Spark.

::

    state-storage-tool export --config-path job.properties --store counts --format parquet --path out/
    state-storage-tool reshard --config-path job.properties --partitions 8

The work is done by :mod:`samzapy.spark.state_data.read`, :mod:`samzapy.spark.state_data.export` and
:mod:`samzapy.spark.state_data.reshard`; this module only parses and prints. pyspark is imported when a
command runs, with an install hint when it is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from samzapy.cli.boundary import Command
from samzapy.tools.common import BadInputError
from samzapy.tools.job_source import config_path_option, load_tool_job

FORMATS = ("parquet", "avro", "json")


def _spark(master: str | None) -> object:
    from samzapy.spark.session import get_spark

    return get_spark(master, "samzapy-state")[0]


@click.command(cls=Command)
@config_path_option
@click.option("--store", required=True, metavar="NAME", help="The store to export.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="parquet", show_default=True)
@click.option("--path", required=True, type=click.Path(path_type=Path), help="Output directory (replaced).")
@click.option(
    "--source",
    type=click.Choice(["changelog", "disk"]),
    default="changelog",
    show_default=True,
    help="Read the changelogs, or the stores on disk.",
)
@click.option(
    "--db-path",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --source disk: the base directory (default: job.logged.store.base.dir).",
)
@click.option(
    "--to-checkpoint", is_flag=True, help="Changelogs up to each task's checkpoint, not to the end."
)
@click.option("--raw", is_flag=True, help="Add the stored bytes (key_bytes, value_bytes).")
@click.option("--master", help="Spark master URL (default: spark-submit's, else local[*]).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show progress on stderr.")
def export(
    config_path: str,
    store: str,
    fmt: str,
    path: Path,
    source: str,
    db_path: Path | None,
    to_checkpoint: bool,
    raw: bool,
    master: str | None,
    progress: bool,
) -> None:
    """Write one row per live key of STORE to PATH (read_state's columns)."""
    setup = load_tool_job(config_path)
    if store not in setup.job.stores:
        known = ", ".join(setup.job.stores)
        msg = f"store '{store}' is not in the config {setup.source}: its stores are {known}"
        raise BadInputError(msg)
    from samzapy.spark.state_data.export import export_frame
    from samzapy.spark.state_data.read import read_state

    frame = read_state(
        _spark(master),
        setup.config,
        store,
        source=source,
        path=db_path,
        to_checkpoint=to_checkpoint,
        raw=raw,
        progress=sys.stderr if progress else None,
    )
    rows = export_frame(frame, fmt, path)
    click.echo(f"exported {rows:,} keys of store '{store}' ({source}) as {fmt} to {path}")


@click.command(cls=Command)
@config_path_option
@click.option("--partitions", required=True, type=click.IntRange(min=1), help="The new task count (M).")
@click.option(
    "--path",
    type=click.Path(file_okay=False, path_type=Path),
    help="Base directory of the new local stores (default: job.logged.store.base.dir).",
)
@click.option("--master", help="Spark master URL (default: spark-submit's, else local[*]).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show progress on stderr.")
def reshard(config_path: str, partitions: int, path: Path | None, master: str | None, progress: bool) -> None:
    """Move every logged store's entries to the task that owns their key among PARTITIONS tasks.

    For a job stopped at the end of its input whose input topics now have PARTITIONS
    partitions: the changelogs are recreated with PARTITIONS partitions, the local stores
    rebuilt under PATH and checkpoints written for the new tasks. Stop the job first.
    """
    setup = load_tool_job(config_path)
    from samzapy.spark.state_data.reshard import reshard as run_reshard

    shown = sys.stderr if progress else None
    stats = run_reshard(setup.config, partitions, base_dir=path, spark=_spark(master), progress=shown)
    click.echo(
        f"resharded {stats.old_tasks} -> {stats.new_tasks} tasks: {stats.keys:,} keys "
        f"({stats.write.bytes / 1e6:.1f} MB) in {stats.seconds:.1f}s, "
        f"{stats.records:,} changelog records read ({stats.rate:,.0f} records/s)"
    )

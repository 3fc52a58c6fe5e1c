"""``state-storage-tool``: materialise a job's stores from their changelogs, and check them.

Samza's ``state-storage-tool.sh`` flags work as they are::

    state-storage-tool restore --config-path=file:///path/to/job.properties --path=/tmp/state
    state-storage-tool verify --config-path job.properties --path /tmp/state

``--config-path`` may also name a pipeline (``app.py``, as ``samzapy run`` takes it:
:mod:`samzapy.tools.job_source`) for ``restore`` and ``verify``.

The work is done by :func:`samzapy.tools.restore.restore_stores` and
:func:`samzapy.tools.verify.verify_stores`; this module only parses and prints. Errors, exit
codes and logging are those of every samzapy command (:mod:`samzapy.cli.boundary`): a bad
argument or config exits 2, a failure 1, each with one ``Error:`` line.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from samzapy.cli.boundary import Group
from samzapy.cli.logs import setup_logging
from samzapy.cli.options import logging_options
from samzapy.progress import Progress
from samzapy.store_codec import render_text, to_json
from samzapy.tools.job_source import config_path_option, load_tool_job
from samzapy.tools.restore import ENGINES, RestoreReport, restore_with_engine
from samzapy.tools.verify import MAX_EXAMPLES, VerifyReport, verify_stores

_PATH = click.Path(file_okay=False, path_type=Path)


@click.group(cls=Group)
@logging_options
def main(verbose: bool, log_file: Path | None, log_format: str, log_config: Path | None) -> None:
    """Restore a job's stores from their changelogs into a directory, and verify them."""
    setup_logging(
        verbose, level=logging.WARNING, log_file=log_file, log_format=log_format, log_config=log_config
    )


@main.command()
@config_path_option
@click.option("--path", "path", required=True, type=_PATH, help="Base directory to restore into.")
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="NAME",
    help="Restore this store (repeatable; default: all logged stores).",
)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    help="Restore this partition = task (repeatable; default: all).",
)
@click.option(
    "--engine", type=click.Choice(ENGINES), default="sequential", show_default=True, help="How to restore."
)
@click.option(
    "--to-checkpoint",
    is_flag=True,
    help="Restore to each task's checkpointed changelog offset instead of the changelog's end, "
    "and undo the records after it as the job does on start. This WRITES to the changelog "
    "(the trim of transactional state): stop the job first.",
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show progress on stderr.")
def restore(
    config_path: str,
    path: Path,
    stores: tuple[str, ...],
    partitions: tuple[int, ...],
    engine: str,
    to_checkpoint: bool,
    progress: bool,
) -> None:
    """Rebuild the job's logged stores into PATH/<store>/Partition_<N>.

    The result has the job's layout and local checkpoints (OFFSET files): a job started with
    job.logged.store.base.dir=PATH replays only the changelog records written after the
    restore. By default the stores are restored to the changelog's end (read-only: safe while
    the job runs); a PATH that already holds restored stores is brought forward incrementally.
    """
    setup = load_tool_job(config_path)
    shown = Progress("restore") if progress else None
    report = restore_with_engine(
        engine,
        setup,
        path,
        stores=stores,
        partitions=partitions,
        to_checkpoint=to_checkpoint,
        progress=shown,
    )
    if isinstance(report, RestoreReport):
        _print_restore(report)
    else:  # the Spark engine's own report
        seconds = getattr(report, "total_s", 0.0)
        click.echo(
            f"restored {report.records:,} records ({report.bytes / 1e6:.1f} MB) with Spark in {seconds:.1f}s"
        )
        click.echo(f"to use it: job.logged.store.base.dir={path}")


def _print_restore(report: RestoreReport) -> None:
    for part in report.partitions:
        base = "from scratch" if part.base_offset is None else f"from local checkpoint {part.base_offset}"
        trimmed = f", {part.trimmed:,} trimmed" if part.trimmed else ""
        click.echo(
            f"{part.store} partition {part.partition}: changelog offset {part.offset} "
            f"({part.records:,} records {base}{trimmed}) -> {part.path}"
        )
    click.echo(
        f"restored {report.records:,} records ({report.bytes / 1e6:.1f} MB) into "
        f"{len(report.partitions)} store partitions in {report.seconds:.1f}s "
        f"({report.rate:,.0f} records/s)"
    )
    click.echo(f"to use it: job.logged.store.base.dir={report.path}")


@main.command()
@config_path_option
@click.option("--path", "path", required=True, type=_PATH, help="Base directory holding the stores.")
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="NAME",
    help="Verify this store (repeatable; default: all found).",
)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    help="Verify this partition (repeatable).",
)
@click.option(
    "--max-examples",
    type=click.IntRange(min=0),
    default=MAX_EXAMPLES,
    show_default=True,
    help="Differences shown per partition.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify(
    config_path: str,
    path: Path,
    stores: tuple[str, ...],
    partitions: tuple[int, ...],
    max_examples: int,
    fmt: str,
) -> None:
    """Compare the stores in PATH with their changelogs.

    The last value per key up to the offset each store records; reports keys missing, extra or
    different. Exits 1 on any difference.
    """
    report = verify_stores(
        load_tool_job(config_path), path, stores=stores, partitions=partitions, max_examples=max_examples
    )
    if fmt == "json":
        _print_verify_json(report)
    else:
        _print_verify_text(report)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _print_verify_text(report: VerifyReport) -> None:
    for part in report.partitions:
        head = f"{part.store} partition {part.partition} (changelog offset {part.offset})"
        if part.problem:
            click.echo(f"{head}: PROBLEM: {part.problem}")
            continue
        if part.ok:
            click.echo(f"{head}: OK, {part.keys:,} keys identical")
            continue
        click.echo(f"{head}: {part.missing} missing, {part.extra} extra, {part.different} different")
        for diff in part.examples:
            click.echo(
                f"  {diff.kind:9} {render_text(diff.key)}: store {_or_absent(diff.store_value)}, "
                f"changelog {_or_absent(diff.changelog_value)}"
            )
    bad = sum(not p.ok for p in report.partitions)
    verdict = "identical to their changelogs" if not bad else f"{bad} differ from their changelogs"
    click.echo(f"{len(report.partitions)} store partitions checked: {verdict}")


def _or_absent(value: object) -> str:
    return "absent" if value is None else render_text(value)


def _print_verify_json(report: VerifyReport) -> None:
    for part in report.partitions:
        click.echo(
            to_json(
                {
                    "store": part.store,
                    "partition": part.partition,
                    "offset": part.offset,
                    "ok": part.ok,
                    "problem": part.problem,
                    "keys": part.keys,
                    "missing": part.missing,
                    "extra": part.extra,
                    "different": part.different,
                    "examples": [
                        {"kind": d.kind, "key": d.key, "store": d.store_value, "changelog": d.changelog_value}
                        for d in part.examples
                    ],
                }
            )
        )


def _register_state_data() -> None:
    """``export`` and ``reshard`` (Spark) live in :mod:`samzapy.tools.state_data`."""
    from samzapy.tools.state_data import export, reshard

    main.add_command(export)
    main.add_command(reshard)


_register_state_data()


def _register_snapshots() -> None:
    """``snapshots list|verify`` live in :mod:`samzapy.tools.snapshots`."""
    from samzapy.tools.snapshots import snapshots

    main.add_command(snapshots)


_register_snapshots()

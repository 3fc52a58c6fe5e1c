"""``samzapy replay``: run a job's task class over its input history in Spark.

The same command is what ``spark-submit jobs/spark_replay.py`` runs, so a replay started
locally and one submitted to a cluster take the same options, and fail the same way
(:mod:`samzapy.cli.boundary`: a bad config or argument exits 2, a failed replay 1).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from samzapy.cli.boundary import Command
from samzapy.cli.logs import setup_logging
from samzapy.cli.options import config_path_option, one_config_path, overrides_option

if TYPE_CHECKING:
    from samzapy.spark.replay.driver import OffsetSpec


def _offsets(value: str, option: str) -> OffsetSpec:
    from samzapy.spark.replay.driver import parse_offsets

    try:
        return parse_offsets(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _time(value: str | None, option: str) -> int | None:
    from samzapy.spark.replay.driver import parse_time

    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@click.command(cls=Command)
@click.argument("config", required=False, metavar="[CONFIG]")
@config_path_option(required=False)
@overrides_option
@click.option(
    "--from",
    "start",
    default="oldest",
    show_default=True,
    metavar="oldest|STREAM:P=OFFSET,...",
    help="Where each input partition starts (unlisted partitions: oldest).",
)
@click.option("--from-time", metavar="T", help="Start at the first record at or after T (ms or ISO 8601).")
@click.option(
    "--to",
    "stop",
    default="latest",
    show_default=True,
    metavar="latest|STREAM:P=OFFSET,...",
    help="Where each input partition stops, exclusive (unlisted partitions: latest).",
)
@click.option("--to-time", metavar="T", help="Stop after the last record at or before T (ms or ISO 8601).")
@click.option(
    "--output",
    default="kafka",
    show_default=True,
    metavar="kafka|DIR",
    help="Outputs to their Kafka topics (with changelogs and a checkpoint), or as files in DIR.",
)
@click.option(
    "--format", "file_format", type=click.Choice(["parquet", "avro"]), default="parquet", show_default=True
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the final stores go (default: job.logged.store.base.dir; DIR/state for file output).",
)
@click.option("--no-checkpoint", is_flag=True, help="Kafka output: do not write the tasks' checkpoints.")
@click.option("--master", help="Spark master URL (default: spark-submit's, else local[*]).")
@click.option(
    "--handoff",
    type=click.Choice(["shared", "collect"]),
    default="shared",
    show_default=True,
    help="How store SST files reach the driver: a shared staging dir, or collected through Spark.",
)
@click.option("--staging-dir", type=click.Path(file_okay=False), help="Shared staging dir for SST files.")
def replay(
    config: str | None,
    config_path: str | None,
    overrides: tuple[str, ...],
    start: str,
    from_time: str | None,
    stop: str,
    to_time: str | None,
    output: str,
    file_format: str,
    state_dir: Path | None,
    no_checkpoint: bool,
    master: str | None,
    handoff: str,
    staging_dir: str | None,
) -> None:
    """Replay a job's input history through its own task class in Spark.

    CONFIG is a .properties file (or --config-path CONFIG), or a pipeline: app.py or
    package.module:app (also as --config-path app.py); with a pipeline as CONFIG,
    --config-path adds a .properties file for the rest.
    """
    from samzapy.config import load_config

    start_spec, stop_spec = _offsets(start, "--from"), _offsets(stop, "--to")
    start_ms, stop_ms = _time(from_time, "--from-time"), _time(to_time, "--to-time")
    if not logging.getLogger().handlers:  # run alone (spark-submit), not under ``samzapy``
        setup_logging()
    from samzapy.pipeline.loader import is_app_spec, pipeline_replay_config
    from samzapy.spark.replay.driver import replay as run_replay

    if config is not None and is_app_spec(config):  # samzapy replay app.py [--config-path x.properties]
        loaded = pipeline_replay_config(config, overrides, config_path)
    else:
        target = one_config_path(config, config_path)
        if is_app_spec(target):  # the older form: --config-path app.py
            loaded = pipeline_replay_config(target, overrides)
        else:
            loaded = load_config(target, overrides)
    stats = run_replay(
        loaded,
        start=start_spec,
        from_time=start_ms,
        stop=stop_spec,
        to_time=stop_ms,
        output=output,
        file_format=file_format,
        state_dir=state_dir,
        write_checkpoint=not no_checkpoint,
        master=master,
        handoff=handoff,
        staging_dir=staging_dir,
    )
    rate = stats.records / stats.spark_job_s if stats.spark_job_s else 0.0
    click.echo(
        f"replayed {stats.records:,} records through {stats.tasks} tasks: {stats.outputs:,} outputs, "
        f"{stats.window_calls} window() calls; Spark start {stats.spark_start_s:.1f}s, "
        f"job {stats.spark_job_s:.1f}s ({rate:,.0f} records/s), total {stats.total_s:.1f}s"
    )
    for name, checkpoint in sorted(stats.checkpoints.items()):
        inputs = ", ".join(f"{ssp}={offset}" for ssp, offset in sorted(checkpoint.input_offsets.items()))
        stores = ", ".join(f"{s}={o}" for s, o in sorted(checkpoint.changelog_offsets.items()))
        click.echo(f"  {name}: inputs {inputs}" + (f"; changelogs {stores}" if stores else ""))

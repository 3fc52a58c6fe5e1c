"""``samzapy run``: run one container of a job.

The config is ``CONFIG`` or ``--config-path CONFIG`` (Samza's ``run-job.sh`` form, also as
``file:///...``). A bad config exits 2 naming file:line before any broker connection; a
failing container exits 1 with one ``Error:`` line (:mod:`samzapy.cli.boundary`).
"""

from __future__ import annotations

from pathlib import Path

import click

from samzapy.cli.boundary import Command
from samzapy.cli.options import config_path_option, one_config_path, overrides_option


@click.command(cls=Command)
@click.argument("config", required=False, metavar="[CONFIG]")
@config_path_option(required=False)
@overrides_option
@click.option(
    "--container-id",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Which container of job.container.count this process is (passthrough mode).",
)
@click.option(
    "--instance-id",
    help="Group mode: this member's static id (job.coordinator.instance.id): restarted within the "
    "session timeout, it gets its tasks back without a rebalance.",
)
@click.option(
    "--exit-at-end",
    is_flag=True,
    help=(
        "Stop once every input is processed up to the end it had at start, after a last "
        "window() call on every task and a final commit."
    ),
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a JSON metrics snapshot here at every commit and at exit.",
)
def run(
    config: str | None,
    config_path: str | None,
    overrides: tuple[str, ...],
    container_id: int,
    instance_id: str | None,
    exit_at_end: bool,
    metrics_file: Path | None,
) -> None:
    """Run the job described by CONFIG (a .properties file; or --config-path CONFIG)."""
    from samzapy.config import load_config, parse_job_config
    from samzapy.container.run_loop import Container

    loaded = load_config(one_config_path(config, config_path), overrides)
    job = parse_job_config(loaded, check_task_class=True)
    container = Container(
        job,
        container_id=container_id,
        exit_at_end=exit_at_end,
        metrics_path=metrics_file,
        instance_id=instance_id,
    )
    code = container.run()
    if code:
        raise click.exceptions.Exit(code)

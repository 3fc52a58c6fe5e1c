"""``samzapy run``: run one container of a job.

The config is ``CONFIG`` or ``--config-path CONFIG`` (Samza's ``run-job.sh`` form, also as
``file:///...``). A bad config exits 2 naming file:line before any broker connection; a
failing container exits 1 with one ``Error:`` line (:mod:`samzapy.cli.boundary`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from samzapy.cli.boundary import Command
from samzapy.cli.options import config_path_option, one_config_path, overrides_option

if TYPE_CHECKING:
    from samzapy.config.model import JobConfig


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
    "--take-over",
    is_flag=True,
    help="Passthrough mode: when this container of the job already runs on this machine, ask it "
    "to stop (it commits first) and take its tasks, instead of refusing to start.",
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a JSON metrics snapshot here at every commit and at exit.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    help="Group mode: run this many members of the job on this host under one parent that "
    "forwards signals, restarts a crashed member and serves one status page and /metrics "
    "(job.processes.per.host; default 1).",
)
def run(
    config: str | None,
    config_path: str | None,
    overrides: tuple[str, ...],
    container_id: int,
    instance_id: str | None,
    exit_at_end: bool,
    take_over: bool,
    metrics_file: Path | None,
    processes: int | None,
) -> None:
    """Run the job described by CONFIG, or the pipeline CONFIG names.

    CONFIG is a .properties file (or --config-path CONFIG), or a pipeline: app.py or
    package.module:app; --config-path then adds a .properties file for the rest.
    """
    from samzapy.config import load_config, parse_job_config

    if config is not None and _maybe_app(config):
        from samzapy.pipeline.loader import pipeline_job

        job = pipeline_job(config, overrides, config_path)
    else:
        loaded = load_config(one_config_path(config, config_path), overrides)
        job = parse_job_config(loaded, check_task_class=True)
    count = job.processes_per_host if processes is None else processes
    if count > 1:
        from samzapy.container.process_group import ProcessGroup, member_command

        if job.coordinator != "group":
            msg = f"{count} processes need group mode (job.coordinator.factory=group); this job is static"
            raise click.BadParameter(msg, param_hint="--processes / job.processes.per.host")
        command = member_command(
            job,
            config=config,
            config_path=config_path,
            overrides=overrides,
            exit_at_end=exit_at_end,
            metrics_file=metrics_file,
            instance_id=instance_id,
        )
        code = ProcessGroup(job, count, command, exit_at_end=exit_at_end).run()
        if code:
            raise click.exceptions.Exit(code)
        return
    with _one_copy(job, container_id, take_over):
        _run_container(job, container_id, exit_at_end, metrics_file, instance_id)


def _maybe_app(config: str) -> bool:
    """Whether CONFIG may name a pipeline app (:func:`samzapy.pipeline.loader.is_app_spec` decides).

    A ``.properties`` file never does, and is answered without importing the pipeline package,
    which brings the stores and the Kafka client (~0.2 s: a config error should be quick).
    """
    if config.endswith(".properties") or config.startswith("file:"):
        return False
    from samzapy.pipeline.loader import is_app_spec

    return is_app_spec(config)


def _one_copy(job: JobConfig, container_id: int, take_over: bool) -> AbstractContextManager[object]:
    """What keeps a second copy of this container from running on this machine.

    Passthrough mode: the container's lock (:mod:`samzapy.instance_lock`), so that a second copy
    on this machine refuses at once (exit 2); group mode: nothing, a second member joins.
    """
    from samzapy.instance_lock import InstanceLock, lock_path

    if job.coordinator == "group":
        return nullcontext()
    what = f"job '{job.job_name}' (id {job.job_id}), container {container_id}"
    lock = InstanceLock(lock_path(job.logged_store_base_dir, job.job_name, job.job_id, container_id), what)
    lock.acquire(take_over=take_over)
    return lock


def _run_container(
    job: JobConfig, container_id: int, exit_at_end: bool, metrics_file: Path | None, instance_id: str | None
) -> None:
    from samzapy.container.gc_policy import apply_run_policy
    from samzapy.container.run_loop import Container

    apply_run_policy()  # a long-running job's collector settings (samzapy/container/gc_policy.py)
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

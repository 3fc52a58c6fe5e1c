"""``samzapy checkpoint show|set``: inspect and move a job's input checkpoints.

A thin click layer over :mod:`samzapy.checkpoint_admin`. Exit codes (by
:mod:`samzapy.cli.boundary`): 0 done, 1 a failure (broker, checkpoint topic, a running job),
2 bad arguments or configuration (a target the job does not have included).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from samzapy.cli.boundary import Group
from samzapy.cli.options import config_path_option, overrides_option
from samzapy.streams import SystemStreamPartition

if TYPE_CHECKING:
    # imported by the commands themselves: every `samzapy` command line imports this module,
    # and the admin brings the Kafka client (samzapy --help must stay cheap)
    from samzapy.checkpoint_admin import Change, CheckpointAdmin, TaskState
    from samzapy.config import Config, JobConfig

_SET_HELP = """Write new checkpoints that move the job's INPUT offsets.

Give exactly one of --to-offset (repeatable), --to-timestamp, --to-oldest, --to-upcoming.

Only input offsets change: every task keeps its changelog offsets, so its stores keep the
state they have. Rewinding input processes those messages again on top of that state (a
counting job counts them twice); skipping ahead leaves their effects out. The job must be
stopped: a running container overwrites these checkpoints at its next commit.
"""


def _load(config_path: str, overrides: Sequence[str]) -> tuple[Config, JobConfig]:
    from samzapy.config import load_config, parse_job_config

    config = load_config(config_path, overrides)
    return config, parse_job_config(config)


def _admin(job: JobConfig) -> CheckpointAdmin:
    from samzapy.checkpoint_admin import CheckpointAdmin
    from samzapy.kafka.broker import resolve_bootstrap_servers

    return CheckpointAdmin(job, resolve_bootstrap_servers(job.consumer_bootstrap_servers))


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, from an integer or an ISO-8601 time (naive: UTC).

    >>> parse_timestamp("1767225600000"), parse_timestamp("2026-01-01T00:00:00Z")
    (1767225600000, 1767225600000)
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        msg = f"'{text}' is not a timestamp: give milliseconds since the epoch or an ISO-8601 time"
        raise click.BadParameter(msg, param_hint="--to-timestamp") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_offsets(values: Sequence[str]) -> dict[SystemStreamPartition, int]:
    """``system.stream.partition=offset`` pairs.

    >>> parse_offsets(["kafka.page.views.0=15"])
    {SystemStreamPartition(system='kafka', stream='page.views', partition=0): 15}
    """
    offsets = {}
    for value in values:
        ssp_text, eq, offset = value.rpartition("=")
        try:
            if not eq or not offset.strip().isdigit():
                raise ValueError(value)
            offsets[SystemStreamPartition.parse(ssp_text)] = int(offset)
        except ValueError as exc:
            msg = f"'{value}' is not SSP=OFFSET (e.g. kafka.pageviews.0=1500)"
            raise click.BadParameter(msg, param_hint="--to-offset") from exc
    return offsets


def _running_container(config: Config, job: JobConfig) -> str | None:
    """The address of a container of this job answering /health on this host, or ``None``.

    Only a container whose config has a Prometheus reporter on a fixed port can be found.
    """
    import urllib.error
    import urllib.request

    for spec in job.reporters:
        if spec.kind != "prometheus" or spec.port == 0:
            continue
        url = f"http://127.0.0.1:{spec.port}/health"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
        except (OSError, ValueError):
            continue
        if body.get("status") in ("restoring", "running") and body.get("job", {}).get("name") == job.job_name:
            return f"{url} says {body['status']}"
    return None


def _show_text(states: list[TaskState]) -> str:
    lines = []
    for state in states:
        heading = f"{state.task_name}" + ("" if state.checkpointed else " (no checkpoint)")
        if state.generation:
            heading += f" generation {state.generation}"
        lines.append(heading)
        for i in state.inputs:
            at = "-" if i.offset is None else str(i.offset)
            lag = "-" if i.lag is None else str(i.lag)
            lines.append(f"  input {i.ssp}: offset {at}, end {i.end}, lag {lag} (oldest {i.oldest})")
        for c in state.changelogs:
            at = "-" if c.offset is None else str(c.offset)
            last = "empty" if c.last is None else str(c.last)
            lines.append(f"  store {c.store}: changelog offset {at} (changelog's last record {last})")
    return "\n".join(lines) if lines else "the job has no tasks"


def _change_text(change: Change) -> list[str]:
    old = change.old.input_offsets if change.old else {}
    lines = [f"{change.new.task_name}" + ("" if change.old else " (had no checkpoint)")]
    for ssp, offset in sorted(change.new.input_offsets.items()):
        before = old.get(ssp)
        moved = "unchanged" if before == offset else f"{'-' if before is None else before} -> {offset}"
        lines.append(f"  input {ssp}: {moved}")
    for store, changelog_offset in sorted(change.new.changelog_offsets.items()):
        lines.append(f"  store {store}: changelog offset {changelog_offset} (kept)")
    return lines


@click.group("checkpoint", cls=Group)
def checkpoint() -> None:
    """Show or set a job's checkpoints (input offsets and store changelog offsets)."""


def _common(func: Any) -> Any:
    return config_path_option()(overrides_option(func))


@checkpoint.command("show")
@_common
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def show(config_path: str, overrides: tuple[str, ...], fmt: str) -> None:
    """Show the checkpoints of a job.

    Per task: each input's checkpointed offset, end and lag (end - offset), and each
    store's checkpointed changelog offset.
    """
    _, job = _load(config_path, overrides)
    with _admin(job) as admin:
        states = admin.show()
    if fmt == "json":
        body = {"job": job.job_name, "job_id": job.job_id, "tasks": [s.to_json() for s in states]}
        click.echo(json.dumps(body, indent=2))
    else:
        click.echo(f"job {job.job_name} (id {job.job_id}), checkpoint topic {job.checkpoint_topic}")
        click.echo(_show_text(states))


@checkpoint.command("set", help=_SET_HELP)
@_common
@click.option(
    "--to-offset", "to_offset", multiple=True, metavar="SSP=OFFSET", help="e.g. kafka.pageviews.0=1500"
)
@click.option("--to-timestamp", metavar="T", help="Milliseconds since the epoch, or ISO-8601 (naive = UTC).")
@click.option("--to-oldest", is_flag=True, help="Every input partition to its oldest message.")
@click.option("--to-upcoming", is_flag=True, help="Every input partition to its end (skip what is there).")
@click.option("--dry-run", is_flag=True, help="Print the new checkpoints without writing them.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation that the job is stopped.")
def set_(
    config_path: str,
    overrides: tuple[str, ...],
    to_offset: tuple[str, ...],
    to_timestamp: str | None,
    to_oldest: bool,
    to_upcoming: bool,
    dry_run: bool,
    yes: bool,
) -> None:
    """Set the checkpoints of a job (the command's help is ``_SET_HELP``)."""
    chosen = sum([bool(to_offset), to_timestamp is not None, to_oldest, to_upcoming])
    if chosen != 1:
        msg = "give exactly one of --to-offset, --to-timestamp, --to-oldest, --to-upcoming"
        raise click.UsageError(msg)
    from samzapy.checkpoint_admin import Target

    target = Target(
        offsets=parse_offsets(to_offset) if to_offset else None,
        timestamp_ms=parse_timestamp(to_timestamp) if to_timestamp is not None else None,
        oldest=to_oldest,
        upcoming=to_upcoming,
    )
    config, job = _load(config_path, overrides)
    running = _running_container(config, job)
    if running and not dry_run:
        msg = f"job '{job.job_name}' is running ({running}): stop it before setting its checkpoints"
        raise click.ClickException(msg)
    with _admin(job) as admin:
        changes = admin.plan(target)
        for change in changes:
            click.echo("\n".join(_change_text(change)))
        if not changes:
            click.echo("nothing to change")
            return
        if dry_run:
            click.echo("dry run: nothing written")
            return
        if not yes:
            click.confirm(
                f"Write {len(changes)} checkpoint(s) of job '{job.job_name}' {target.describe()}? "
                "The job must be stopped",
                abort=True,
            )
        admin.write(changes)
    click.echo(f"wrote {len(changes)} checkpoint(s) to {job.checkpoint_topic}")

"""``state-storage-tool snapshots list|verify``: a job's store snapshots in its blob store.

``list`` shows every snapshot of every task (changelog offset, generation, files, size, when);
``verify`` downloads each and checks every file's size and SHA-256 (exit 1 when one is
damaged). The blob store is the job's ``blob.store.uri`` (docs/operations.md, Snapshots).
"""

from __future__ import annotations

import datetime as dt

import click

from samzapy.store_codec import to_json
from samzapy.stores.snapshot_index import SnapshotLayout, TaskSnapshots, job_label
from samzapy.stores.snapshot_restore import snapshot_partitions, verify_snapshot
from samzapy.stores.snapshots import job_blob_store
from samzapy.tools.common import BadInputError, select_stores
from samzapy.tools.job_source import config_path_option, load_tool_job

__all__ = ["snapshots"]


@click.group()
def snapshots() -> None:
    """Show and check the store snapshots in the job's blob store (blob.store.uri)."""


def _views(config_path: str, stores: tuple[str, ...], partitions: tuple[int, ...]) -> list[TaskSnapshots]:
    setup = load_tool_job(config_path)
    blob = job_blob_store(setup.job)
    if blob is None:
        msg = f"{setup.source} sets no blob.store.uri: the job keeps no snapshots"
        raise BadInputError(msg)
    label = job_label(setup.job.job_name, setup.job.job_id)
    views = []
    for store in select_stores(setup, stores, logged_only=True):
        for partition in snapshot_partitions(blob, label, store.name):
            if not partitions or partition in partitions:
                views.append(TaskSnapshots(blob, SnapshotLayout(label, store.name, partition)))
    return views


_STORE = click.option(
    "--store", "stores", multiple=True, metavar="NAME", help="Only this store (repeatable)."
)
_PARTITION = click.option(
    "--partition",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    help="Only this partition (repeatable).",
)


@snapshots.command("list")
@config_path_option
@_STORE
@_PARTITION
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_snapshots(config_path: str, stores: tuple[str, ...], partitions: tuple[int, ...], fmt: str) -> None:
    """List every snapshot, newest first per store and task."""
    count = 0
    for view in _views(config_path, stores, partitions):
        for index in view.readable_indexes():
            count += 1
            when = dt.datetime.fromtimestamp(index.created_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            if fmt == "json":
                body = {
                    "store": index.store,
                    "task": index.task,
                    "snapshot": index.name,
                    "changelog_offset": index.changelog_offset,
                    "generation": index.generation,
                    "files": len(index.files),
                    "bytes": index.total_bytes,
                    "created": when,
                }
                click.echo(to_json(body))
            else:
                click.echo(
                    f"{index.store} {index.task}: {index.name} changelog offset {index.changelog_offset}, "
                    f"generation {index.generation}, {len(index.files)} files, "
                    f"{index.total_bytes / 1e6:.1f} MB, {when} UTC"
                )
    if fmt == "text":
        click.echo(f"{count} snapshots")


@snapshots.command("verify")
@config_path_option
@_STORE
@_PARTITION
def verify_snapshots(config_path: str, stores: tuple[str, ...], partitions: tuple[int, ...]) -> None:
    """Download every snapshot and check each file's size and SHA-256; exit 1 if one is damaged."""
    bad = checked = 0
    for view in _views(config_path, stores, partitions):
        for index in view.readable_indexes():
            checked += 1
            problem = verify_snapshot(view.blob, view.layout, index)
            head = f"{index.store} {index.task} {index.name}"
            if problem is None:
                click.echo(f"{head}: OK, {len(index.files)} files, every checksum good")
            else:
                bad += 1
                click.echo(f"{head}: DAMAGED: {problem}")
    click.echo(f"{checked} snapshots checked: " + ("all good" if not bad else f"{bad} damaged"))
    if bad:
        raise click.exceptions.Exit(1)

"""``samzapy generate``: produce seeded example data (:mod:`samzapy.generate`) to a broker."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from samzapy.cli.boundary import Group
from samzapy.generate import (
    HOUR_MS,
    AdSpec,
    PageViewSpec,
    ads,
    pageviews,
    produce_end_of_stream,
    produce_json,
    profiles,
    settings,
)

F = TypeVar("F", bound=Callable[..., Any])
#: A generated record: its key and its JSON value (``None``: a tombstone).
Keyed = tuple[bytes, dict[str, Any] | None]


@click.group("generate", cls=Group)
def generate() -> None:
    """Produce seeded example data to the broker."""


@generate.command("pageviews")
@click.option(
    "--bootstrap-servers",
    default="embedded",
    show_default=True,
    help="Broker address, or 'embedded' for the dev broker.",
)
@click.option("--topic", default="pageviews", show_default=True)
@click.option("--partitions", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--count", default=10_000, show_default=True, type=click.IntRange(min=0))
@click.option("--users", default=100, show_default=True, type=click.IntRange(min=1))
@click.option("--pages", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=42, show_default=True)
@click.option(
    "--hours",
    default=3.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Event-time span of the data.",
)
@click.option(
    "--disorder-ms",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Move each event back in time by up to this much (out-of-order data).",
)
@click.option(
    "--late-fraction",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Fraction of events moved back by two hours (late data).",
)
def generate_pageviews(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    count: int,
    users: int,
    pages: int,
    seed: int,
    hours: float,
    disorder_ms: int,
    late_fraction: float,
) -> None:
    """Page views keyed by page: {"view_id", "user_id", "page", "ts"}."""
    from samzapy.kafka.broker import resolve_bootstrap_servers

    spec = PageViewSpec(
        count=count,
        users=users,
        pages=pages,
        seed=seed,
        span_ms=int(hours * HOUR_MS),
        disorder_ms=disorder_ms,
        late_fraction=late_fraction,
    )
    servers = resolve_bootstrap_servers(bootstrap_servers)
    sent = produce_json(servers, topic, partitions, pageviews(spec))
    click.echo(f"produced {sent} page views to '{topic}' ({partitions} partitions) on {servers}")


_COMMON = [
    click.option(
        "--bootstrap-servers",
        default="embedded",
        show_default=True,
        help="Broker address, or 'embedded' for the dev broker.",
    ),
    click.option("--partitions", default=4, show_default=True, type=click.IntRange(min=1)),
    click.option("--seed", default=42, show_default=True),
]


def _common(fn: F) -> F:
    for option in reversed(_COMMON):
        fn = option(fn)
    return fn


def _send(bootstrap_servers: str, topic: str, partitions: int, records: Iterable[Keyed], what: str) -> None:
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(bootstrap_servers)
    sent = produce_json(servers, topic, partitions, records)
    click.echo(f"produced {sent} {what} to '{topic}' ({partitions} partitions) on {servers}")


def _table_updates_command(name: str, source: Callable[..., Iterable[Keyed]], what: str, doc: str) -> None:
    """Register ``samzapy generate NAME``: ``--count`` updates of a user table from ``source``."""

    @generate.command(name, help=doc)
    @_common
    @click.option("--topic", default=name, show_default=True)
    @click.option("--count", default=1_000, show_default=True, type=click.IntRange(min=0))
    @click.option("--users", default=100, show_default=True, type=click.IntRange(min=1))
    @click.option("--delete-fraction", default=0.0, show_default=True, type=click.FloatRange(0, 1))
    def command(
        bootstrap_servers: str,
        partitions: int,
        seed: int,
        topic: str,
        count: int,
        users: int,
        delete_fraction: float,
    ) -> None:
        records = source(count, users, seed, delete_fraction=delete_fraction)
        _send(bootstrap_servers, topic, partitions, records, what)


_table_updates_command(
    "profiles",
    profiles,
    "profile updates",
    'Profile updates keyed by user: {"user_id", "name", "zip", "updated_at"}.',
)
_table_updates_command(
    "settings",
    settings,
    "settings updates",
    'Settings updates keyed by user: {"user_id", "language", "notifications", "updated_at"}.',
)


def _ad_spec_options(fn: F) -> F:
    options = [
        click.option(
            "--impressions", "impression_count", default=5_000, show_default=True, type=click.IntRange(min=0)
        ),
        click.option("--click-rate", default=0.3, show_default=True, type=click.FloatRange(0, 1)),
        click.option("--duplicate-rate", default=0.1, show_default=True, type=click.FloatRange(0, 1)),
        click.option("--orphan-clicks", default=50, show_default=True, type=click.IntRange(min=0)),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@generate.command("impressions")
@_common
@_ad_spec_options
@click.option("--topic", default="impressions", show_default=True)
def generate_impressions(
    bootstrap_servers: str,
    partitions: int,
    seed: int,
    impression_count: int,
    click_rate: float,
    duplicate_rate: float,
    orphan_clicks: int,
    topic: str,
) -> None:
    """Ad impressions keyed by impression id (use the same options and seed as for clicks)."""
    spec = AdSpec(impression_count, click_rate, duplicate_rate, orphan_clicks, seed)
    _send(bootstrap_servers, topic, partitions, ads(spec)[0], "impressions")


@generate.command("clicks")
@_common
@_ad_spec_options
@click.option("--topic", default="clicks", show_default=True)
def generate_clicks(
    bootstrap_servers: str,
    partitions: int,
    seed: int,
    impression_count: int,
    click_rate: float,
    duplicate_rate: float,
    orphan_clicks: int,
    topic: str,
) -> None:
    """Ad clicks keyed by impression id, with duplicates and orphans (same options as impressions)."""
    spec = AdSpec(impression_count, click_rate, duplicate_rate, orphan_clicks, seed)
    _send(bootstrap_servers, topic, partitions, ads(spec)[1], "clicks")


@generate.command("end-of-stream")
@click.option(
    "--bootstrap-servers",
    default="embedded",
    show_default=True,
    help="Broker address, or 'embedded' for the dev broker.",
)
@click.argument("topics", nargs=-1, required=True)
def generate_end_of_stream(bootstrap_servers: str, topics: tuple[str, ...]) -> None:
    """Mark the end of TOPICS.

    An end-of-stream control record on every partition, so that event-time jobs emit their last
    windows (see docs/patterns/window-aggregation.md).
    """
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(bootstrap_servers)
    for topic in topics:
        partitions = produce_end_of_stream(servers, topic)
        click.echo(f"marked the end of '{topic}' ({partitions} partitions) on {servers}")

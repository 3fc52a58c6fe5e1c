"""``samzapy generate``: seeded example data for the jobs in ``jobs/``.

Every generator is deterministic for a given ``--seed``, so tests can compute the expected
outputs independently from the same records.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import click
import orjson

HOUR_MS = 3_600_000
#: 2026-01-01T00:00:00Z, the default start of generated event time.
DEFAULT_START_MS = 1_767_225_600_000


@dataclass(frozen=True)
class PageViewSpec:
    """Shape of generated page views: how many, over how many users and pages, in what order."""

    count: int = 10_000
    users: int = 100
    pages: int = 50
    seed: int = 42
    start_ms: int = DEFAULT_START_MS
    span_ms: int = 3 * HOUR_MS
    disorder_ms: int = 0
    late_fraction: float = 0.0
    late_by_ms: int = 2 * HOUR_MS


def pageviews(spec: PageViewSpec) -> Iterator[tuple[bytes, dict]]:
    """Yield ``(key, view)`` page views; the key is the page (not the user), as a site logs them.

    Event time advances evenly over ``span_ms``; each event is moved back by up to
    ``disorder_ms`` (out of order), and a ``late_fraction`` of events is moved back by
    ``late_by_ms`` (late).
    """
    rng = random.Random(spec.seed)
    step = spec.span_ms / max(1, spec.count)
    for i in range(spec.count):
        ts = spec.start_ms + int(i * step)
        if spec.disorder_ms:
            ts -= rng.randrange(spec.disorder_ms)
        if spec.late_fraction and rng.random() < spec.late_fraction:
            ts -= spec.late_by_ms
        page = f"/page/{rng.randrange(spec.pages)}"
        view = {"view_id": f"v{i}", "user_id": f"user-{rng.randrange(spec.users)}", "page": page, "ts": ts}
        yield page.encode(), view


def profiles(
    count: int, users: int, seed: int = 42, start_ms: int = DEFAULT_START_MS, delete_fraction: float = 0.0
) -> Iterator[tuple[bytes, dict | None]]:
    """Yield ``count`` profile updates keyed by user id: {"user_id", "name", "zip", "updated_at"};
    a ``delete_fraction`` of them are deletions (value ``None``, a tombstone)."""
    rng = random.Random(seed)
    for i in range(count):
        user = f"user-{rng.randrange(users)}"
        if delete_fraction and rng.random() < delete_fraction:
            yield user.encode(), None
            continue
        yield (
            user.encode(),
            {
                "user_id": user,
                "name": f"name-{i}",
                "zip": f"{rng.randrange(10000, 99999)}",
                "updated_at": start_ms + i * 1000,
            },
        )


def settings(
    count: int, users: int, seed: int = 43, start_ms: int = DEFAULT_START_MS, delete_fraction: float = 0.0
) -> Iterator[tuple[bytes, dict | None]]:
    """Yield ``count`` settings updates keyed by user id: {"user_id", "language", "notifications",
    "updated_at"}; a ``delete_fraction`` of them are deletions."""
    rng = random.Random(seed)
    for i in range(count):
        user = f"user-{rng.randrange(users)}"
        if delete_fraction and rng.random() < delete_fraction:
            yield user.encode(), None
            continue
        yield (
            user.encode(),
            {
                "user_id": user,
                "language": rng.choice(["en", "fr", "de", "zh", "es"]),
                "notifications": rng.random() < 0.5,
                "updated_at": start_ms + i * 1000,
            },
        )


@dataclass(frozen=True)
class AdSpec:
    """Shape of generated ad impressions and clicks (Photon's query and click logs)."""

    impressions: int = 5_000
    click_rate: float = 0.3
    duplicate_rate: float = 0.1
    orphan_clicks: int = 50
    seed: int = 42
    start_ms: int = DEFAULT_START_MS
    span_ms: int = HOUR_MS
    max_click_delay_ms: int = 60_000
    disorder_ms: int = 5_000


def ads(spec: AdSpec) -> tuple[list[tuple[bytes, dict]], list[tuple[bytes, dict]]]:
    """``(impressions, clicks)``, both keyed by impression id, each in its arrival order.

    A ``click_rate`` of impressions get a click (``click_delay`` after it, event time); a
    ``duplicate_rate`` of clicks are sent twice (same click id); ``orphan_clicks`` clicks
    name impressions that never arrive. Arrival order is event time plus up to
    ``disorder_ms`` of jitter, per stream, so a click can arrive before its impression.
    """
    rng = random.Random(spec.seed)
    step = spec.span_ms / max(1, spec.impressions)
    impressions: list[tuple[int, bytes, dict]] = []
    clicks: list[tuple[int, bytes, dict]] = []
    for i in range(spec.impressions):
        ts = spec.start_ms + int(i * step)
        imp_id = f"imp-{i}"
        impression = {
            "impression_id": imp_id,
            "ad_id": f"ad-{rng.randrange(100)}",
            "user_id": f"user-{rng.randrange(1000)}",
            "ts": ts,
        }
        impressions.append((ts + rng.randrange(spec.disorder_ms + 1), imp_id.encode(), impression))
        if rng.random() < spec.click_rate:
            click_ts = ts + rng.randrange(1, spec.max_click_delay_ms)
            click = {"click_id": f"click-{i}", "impression_id": imp_id, "ts": click_ts}
            copies = 2 if rng.random() < spec.duplicate_rate else 1
            for _ in range(copies):
                clicks.append((click_ts + rng.randrange(spec.disorder_ms + 1), imp_id.encode(), click))
    for j in range(spec.orphan_clicks):
        ts = spec.start_ms + rng.randrange(spec.span_ms)
        imp_id = f"missing-{j}"
        clicks.append((ts, imp_id.encode(), {"click_id": f"orphan-{j}", "impression_id": imp_id, "ts": ts}))
    impressions.sort(key=lambda item: item[0])
    clicks.sort(key=lambda item: item[0])
    return [(k, v) for _, k, v in impressions], [(k, v) for _, k, v in clicks]


def produce_json(
    bootstrap_servers: str, topic: str, partitions: int, records: Iterable[tuple[bytes, dict | None]]
) -> int:
    """Create ``topic`` with ``partitions`` if missing and produce the records as JSON,
    partitioned by key as Kafka's default partitioner does. Returns how many were sent."""
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.producer import Producer

    with TopicAdmin(bootstrap_servers) as admin:
        admin.ensure_topic(topic, partitions)
    producer = Producer(bootstrap_servers)
    sent = 0
    try:
        for key, value in records:
            producer.send(topic, key, None if value is None else orjson.dumps(value))
            sent += 1
        producer.flush()
    finally:
        producer.close()
    return sent


def produce_end_of_stream(bootstrap_servers: str, topic: str) -> int:
    """Append an ``end-of-stream`` control record (see :mod:`samzapy.operators.event_time`) to every
    partition of ``topic``: event-time jobs then close their last windows and expire their
    last join entries. Returns the number of partitions."""
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.producer import Producer
    from samzapy.operators.event_time import end_of_stream_record

    with TopicAdmin(bootstrap_servers) as admin:
        partitions = admin.partition_count(topic)
    if partitions is None:
        msg = f"topic '{topic}' does not exist on {bootstrap_servers}; produce its data first"
        raise click.ClickException(msg)
    headers, value = end_of_stream_record()
    producer = Producer(bootstrap_servers)
    try:
        for partition in range(partitions):
            producer.send(topic, None, value, partition=partition, headers=headers)
        producer.flush()
    finally:
        producer.close()
    return partitions


@click.group()
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


def _common(fn):  # noqa: ANN001, ANN202 - a decorator stack
    for option in reversed(_COMMON):
        fn = option(fn)
    return fn


def _send(bootstrap_servers: str, topic: str, partitions: int, records: Iterable, what: str) -> None:
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(bootstrap_servers)
    sent = produce_json(servers, topic, partitions, records)
    click.echo(f"produced {sent} {what} to '{topic}' ({partitions} partitions) on {servers}")


def _table_updates_command(name: str, source: Any, what: str, doc: str) -> None:
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


def _ad_spec_options(fn):  # noqa: ANN001, ANN202 - a decorator stack
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
    """Mark the end of TOPICS: an end-of-stream control record on every partition, so that
    event-time jobs emit their last windows (see docs/patterns/window-aggregation.md)."""
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(bootstrap_servers)
    for topic in topics:
        partitions = produce_end_of_stream(servers, topic)
        click.echo(f"marked the end of '{topic}' ({partitions} partitions) on {servers}")

"""``samzapy generate``: seeded example data for the jobs in ``jobs/``.

Every generator is deterministic for a given ``--seed``, so tests can compute the expected
outputs independently from the same records.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

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


def produce_json(bootstrap_servers: str, topic: str, partitions: int,
                 records: Iterator[tuple[bytes, dict]]) -> int:
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
            producer.send(topic, key, orjson.dumps(value))
            sent += 1
        producer.flush()
    finally:
        producer.close()
    return sent


@click.group()
def generate() -> None:
    """Produce seeded example data to the broker."""


@generate.command("pageviews")
@click.option("--bootstrap-servers", default="embedded", show_default=True,
              help="Broker address, or 'embedded' for the dev broker.")
@click.option("--topic", default="pageviews", show_default=True)
@click.option("--partitions", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--count", default=10_000, show_default=True, type=click.IntRange(min=0))
@click.option("--users", default=100, show_default=True, type=click.IntRange(min=1))
@click.option("--pages", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=42, show_default=True)
@click.option("--hours", default=3.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Event-time span of the data.")
@click.option("--disorder-ms", default=0, show_default=True, type=click.IntRange(min=0),
              help="Move each event back in time by up to this much (out-of-order data).")
@click.option("--late-fraction", default=0.0, show_default=True, type=click.FloatRange(0, 1),
              help="Fraction of events moved back by two hours (late data).")
def generate_pageviews(bootstrap_servers: str, topic: str, partitions: int, count: int, users: int,
                       pages: int, seed: int, hours: float, disorder_ms: int, late_fraction: float) -> None:
    """Page views keyed by page: {"view_id", "user_id", "page", "ts"}."""
    from samzapy.kafka.broker import resolve_bootstrap_servers

    spec = PageViewSpec(count=count, users=users, pages=pages, seed=seed, span_ms=int(hours * HOUR_MS),
                        disorder_ms=disorder_ms, late_fraction=late_fraction)
    servers = resolve_bootstrap_servers(bootstrap_servers)
    sent = produce_json(servers, topic, partitions, pageviews(spec))
    click.echo(f"produced {sent} page views to '{topic}' ({partitions} partitions) on {servers}")

"""Seeded example data for the jobs in ``jobs/`` (``samzapy generate``, the quickstart, the tests).

Every generator is deterministic for a given ``seed``, so tests can compute the expected
outputs independently from the same records. The command line is :mod:`samzapy.cli.generate`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from samzapy.errors import KafkaSystemError

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


def pageviews(spec: PageViewSpec) -> Iterator[tuple[bytes, dict[str, Any]]]:
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
) -> Iterator[tuple[bytes, dict[str, Any] | None]]:
    """Yield ``count`` profile updates keyed by user id.

    Each is {"user_id", "name", "zip", "updated_at"}; a ``delete_fraction`` of them are
    deletions (value ``None``, a tombstone).
    """
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
) -> Iterator[tuple[bytes, dict[str, Any] | None]]:
    """Yield ``count`` settings updates keyed by user id.

    Each is {"user_id", "language", "notifications", "updated_at"}; a ``delete_fraction`` of
    them are deletions.
    """
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


def ads(spec: AdSpec) -> tuple[list[tuple[bytes, dict[str, Any]]], list[tuple[bytes, dict[str, Any]]]]:
    """``(impressions, clicks)``, both keyed by impression id, each in its arrival order.

    A ``click_rate`` of impressions get a click (``click_delay`` after it, event time); a
    ``duplicate_rate`` of clicks are sent twice (same click id); ``orphan_clicks`` clicks
    name impressions that never arrive. Arrival order is event time plus up to
    ``disorder_ms`` of jitter, per stream, so a click can arrive before its impression.
    """
    rng = random.Random(spec.seed)
    step = spec.span_ms / max(1, spec.impressions)
    impressions: list[tuple[int, bytes, dict[str, Any]]] = []
    clicks: list[tuple[int, bytes, dict[str, Any]]] = []
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
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    records: Iterable[tuple[bytes, dict[str, Any] | None]],
) -> int:
    """Create ``topic`` with ``partitions`` if missing and produce the records as JSON.

    Records are partitioned by key as Kafka's default partitioner does. Returns how many were
    sent.
    """
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
    """Append an ``end-of-stream`` control record to every partition of ``topic``.

    See :mod:`samzapy.operators.event_time`: event-time jobs then close their last windows and
    expire their last join entries. Returns the number of partitions.
    """
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.producer import Producer
    from samzapy.operators.event_time import end_of_stream_record

    with TopicAdmin(bootstrap_servers) as admin:
        partitions = admin.partition_count(topic)
    if partitions is None:
        msg = f"topic '{topic}' does not exist on {bootstrap_servers}; produce its data first"
        raise KafkaSystemError(msg)
    headers, value = end_of_stream_record()
    producer = Producer(bootstrap_servers)
    try:
        for partition in range(partitions):
            producer.send(topic, None, value, partition=partition, headers=headers)
        producer.flush()
    finally:
        producer.close()
    return partitions

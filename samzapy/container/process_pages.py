"""One status page and one ``/metrics`` for the members a parent runs on a host.

The members of ``samzapy run --processes N`` (:mod:`samzapy.container.process_group`) each
serve their pages on a loopback port of their own; the parent serves the job's configured
ports and answers from theirs:

- ``/metrics``: every member's Prometheus exposition, parsed and merged into one, each sample
  with a ``process`` label (the member's index), so that no series of two members collide and
  ``sum by (...)`` gives the host's figure. A member that does not answer is left out (its
  absence is the ``samzapy_process_up`` gauge at 0).
- ``/status.json``: the first answering member's document with the tasks of all of them, the
  totals summed, and the members as the page's "other containers" (``peers``).
- ``/`` the page itself, ``/health`` 200 when every member answers its own ``/health`` with 200.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

#: Seconds the parent waits for one member's page.
MEMBER_TIMEOUT_S = 2.0
#: The totals of ``/status.json`` that add up over members.
_SUMMED = ("processed", "messages_per_s", "lag", "dropped", "dead_lettered", "disk_bytes", "commits")


@dataclass(frozen=True)
class Member:
    """One member as the pages see it: its index and where its own pages are (``None``: none yet)."""

    index: int
    url: str | None
    pid: int | None


def fetch(url: str, token: str | None, timeout_s: float = MEMBER_TIMEOUT_S) -> tuple[int, bytes] | None:
    """``(status, body)`` of ``GET url`` (with the bearer token), ``None`` when nothing answers."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ValueError):
        return None


def _each(members: Sequence[Member], path: str, token: str | None) -> list[tuple[Member, bytes | None]]:
    """Every member's ``path`` (``None`` for a member without a page, or that did not answer 200)."""

    def one(member: Member) -> tuple[Member, bytes | None]:
        if member.url is None:
            return member, None
        got = fetch(member.url + path, token)
        return member, got[1] if got is not None and got[0] == 200 else None

    with ThreadPoolExecutor(max_workers=max(1, len(members))) as pool:
        return list(pool.map(one, members))


class _Families:
    """A collector yielding the given metric families (for ``generate_latest``)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


def merged_metrics(members: Sequence[Member], token: str | None) -> bytes:
    """One Prometheus text exposition of every member's ``/metrics`` (see the module doc)."""
    families: dict[str, Metric] = {}
    up = GaugeMetricFamily(
        "samzapy_process_up",
        "Whether the member process answered this scrape (1) or not (0).",
        labels=["process"],
    )
    for member, body in _each(members, "/metrics", token):
        up.add_metric([str(member.index)], 0.0 if body is None else 1.0)
        if body is None:
            continue
        for family in text_string_to_metric_families(body.decode()):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            for sample in family.samples:
                labels = {**sample.labels, "process": str(member.index)}
                merged.samples.append(sample._replace(labels=labels))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([up, *families.values()]))  # a duck-typed collector
    return generate_latest(registry)


def merged_health(members: Sequence[Member], token: str | None) -> tuple[int, bytes]:
    """200 when every member's ``/health`` is 200, else 503 naming those that are not."""
    down = [m.index for m, body in _each(members, "/health", token) if body is None]
    if not down:
        return 200, f"ok: {len(members)} processes\n".encode()
    return 503, f"processes not healthy: {', '.join(map(str, down))}\n".encode()


def merged_status(members: Sequence[Member], token: str | None) -> dict[str, Any] | None:
    """The host's ``/status.json`` (see the module doc); ``None`` when no member answers."""
    documents: list[tuple[Member, dict[str, Any] | None]] = []
    for member, body in _each(members, "/status.json?scope=local", token):
        documents.append((member, None if body is None else json.loads(body)))
    answered = [(m, d) for m, d in documents if d is not None]
    if not answered:
        return None
    merged = dict(answered[0][1])
    merged["tasks"] = sorted(
        (t for _, d in answered for t in d.get("tasks", [])), key=lambda t: str(t.get("name"))
    )
    totals = dict(merged.get("totals", {}))
    for name in _SUMMED:
        values = [d.get("totals", {}).get(name) for _, d in answered]
        totals[name] = sum(v for v in values if isinstance(v, int | float))
    merged["totals"] = totals
    merged["container"] = {
        **merged.get("container", {}),
        "name": f"{len(members)} processes on this host (samzapy run --processes)",
    }
    merged["peers"] = [_peer(member, document) for member, document in documents]
    return merged


def _peer(member: Member, document: dict[str, Any] | None) -> dict[str, Any]:
    name = f"process {member.index}" + ("" if member.pid is None else f" (pid {member.pid})")
    if document is None:
        return {"name": name, "url": member.url, "error": "did not answer (starting, or restarting)"}
    return {
        "name": name,
        "url": member.url,
        "status": document.get("container", {}).get("status"),
        "tasks": [t.get("name") for t in document.get("tasks", [])],
        "messages_per_s": document.get("totals", {}).get("messages_per_s"),
        "lag": document.get("totals", {}).get("lag"),
        "restore": document.get("restore"),
    }

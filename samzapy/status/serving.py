"""Serving the status page (``/``) and its JSON (``/status.json``).

On every HTTP port of a container; and finding the other containers of the job for its job-wide
table.

The other containers are known by the addresses they announce for interactive queries: the
directory topic (static mode) or the group's assignment (group mode). A job without
``job.query.port`` shows this container only, and says so.
"""

from __future__ import annotations

import functools
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from samzapy.http_server import BackgroundHttpServer
from samzapy.query.routing import GroupPlacement
from samzapy.query.startup import RunningQueries
from samzapy.reporters import container_name
from samzapy.reporters.prometheus import MetricsHttpServer
from samzapy.status.report import StatusReport, StatusSampler

if TYPE_CHECKING:
    from samzapy.container.run_loop import Container

log = logging.getLogger(__name__)

#: Seconds the page waits for another container's status.
PEER_TIMEOUT_S = 1.5
HTML = "text/html; charset=utf-8"
JSON = "application/json"


@functools.cache
def page() -> bytes:
    """The status page: one static HTML file with its CSS and script (no build step)."""
    return files("samzapy.status").joinpath("page.html").read_bytes()


class RunningStatus:
    """A container's status page: its sampler and the servers it was added to."""

    def __init__(self, report: StatusReport, servers: list[BackgroundHttpServer]) -> None:
        self.report = report
        self.servers = servers

    def stop(self) -> None:
        """Stop sampling (the servers stop with their owners)."""
        self.report.sampler.stop()


def start_status(container: Container, queries: RunningQueries | None) -> RunningStatus | None:
    """Serve the status page of ``container`` on each of its HTTP servers.

    Its HTTP servers: its Prometheus reporters', the query server of ``queries``; ``None`` when
    it has none.
    """
    servers = [r.http for r in container.reporters.running if isinstance(r, MetricsHttpServer)]
    if queries is not None and queries.server is not None:
        servers.append(queries.server)
    if not servers:
        return None
    sampler = StatusSampler(container.registry)
    own_url = queries.url if queries is not None else f"http://{servers[0].host}:{servers[0].port}"
    report = StatusReport(
        container.job,
        container_name(container.container_id)
        if container.job.coordinator != "group"
        else _member_name(container),
        container.container_id,
        container.instance_id,
        container.status,
        sampler,
        url=lambda: own_url,
        peers=None if queries is None else lambda: _peers(container, queries, servers[0].token),
    )
    sampler.start()
    for server in servers:
        if not server.has_route("/"):
            server.add_route("/", lambda target, headers: (200, HTML, page()), guarded=True)
            server.add_route("/status.json", lambda target, headers: _json(report, target), guarded=True)
    log.info("status page at %s/", own_url)
    return RunningStatus(report, servers)


def _member_name(container: Container) -> str:
    return f"member {container.instance_id}" if container.instance_id else "group member"


def _json(report: StatusReport, target: str) -> tuple[int, str, bytes]:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
    local = query.get("scope", [""])[-1] == "local"
    return 200, JSON, json.dumps(report.build(with_peers=not local), default=str).encode()


def _peers(container: Container, queries: RunningQueries, token: str | None) -> list[dict[str, Any]]:
    """Every other container's status: name, state, tasks, rate, lag, address (or the error)."""
    placement = queries.service.placement
    wanted: dict[str, str | None] = {}
    if isinstance(placement, GroupPlacement):
        wanted = {str(url): str(url) for url in placement.others()}  # a group member's are URLs
    else:
        directory = queries.service.directory
        known = directory.known() if directory is not None else {}
        for other in range(container.job.container_count):
            if other != container.container_id:
                wanted[container_name(other)] = known.get(other)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(wanted)))) as pool:
        return list(pool.map(lambda item: _peer(item[0], item[1], token), sorted(wanted.items())))


def _peer(name: str, url: str | None, token: str | None) -> dict[str, Any]:
    if url is None:
        return {"name": name, "url": None, "error": "has not announced an address (not started yet?)"}
    request = urllib.request.Request(
        f"{url}/status.json?scope=local", headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=PEER_TIMEOUT_S) as response:
            found = json.loads(response.read())
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return {"name": name, "url": url, "error": f"did not answer: {reason}"}
    tasks: list[Mapping[str, Any]] = found.get("tasks", [])
    return {
        "name": found.get("container", {}).get("name", name),
        "url": url,
        "status": found.get("container", {}).get("status"),
        "tasks": [t["name"] for t in tasks],
        "messages_per_s": found.get("totals", {}).get("messages_per_s"),
        "lag": found.get("totals", {}).get("lag"),
        "restore": found.get("restore"),
    }

"""The HTTP side of interactive queries.

A server of its own, or a route added to the Prometheus reporter's server when both are
configured on the same port.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from samzapy.http_server import BackgroundHttpServer
from samzapy.query.service import QueryService

log = logging.getLogger(__name__)

JSON = "application/json"
#: The path prefix the query service answers under.
PREFIX = "/stores"


def route(
    service: QueryService, target: str, _headers: Mapping[str, str] | None = None
) -> tuple[int, str, bytes]:
    """``(status, content type, body)`` for ``GET target``; never raises (a bug is a 500)."""
    try:
        answer = service.handle(target)
    except Exception as exc:
        log.exception("query %s failed", target[:200])
        return 500, JSON, f'{{"error": "internal error: {type(exc).__name__}"}}'.encode()
    return answer.status, JSON, answer.encode()


def add_query_route(server: BackgroundHttpServer, service: QueryService) -> None:
    """Serve ``/stores/...`` from ``server`` (guarded by the bearer token, when one is set)."""
    server.add_route(PREFIX, lambda target, headers: route(service, target), prefix=True, guarded=True)


class QueryHttpServer(BackgroundHttpServer):
    """Serves ``/stores/...`` on ``host:port`` (0: any free port) on daemon threads."""

    def __init__(self, service: QueryService, host: str, port: int, token: str | None = None) -> None:
        super().__init__(
            host,
            port,
            what="the query server",
            port_key="job.query.port",
            thread_name="query-http",
            token=token,
        )
        self.service = service
        add_query_route(self, service)

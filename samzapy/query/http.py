"""The HTTP side of interactive queries: a server of its own, or routes added to the
Prometheus reporter's server when both are configured on the same port."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import Any

from samzapy.http_server import BackgroundHttpServer, send
from samzapy.query.service import QueryService

log = logging.getLogger(__name__)

JSON = "application/json"
#: The path prefix the query service answers under.
PREFIX = "/stores"


def route(service: QueryService, target: str) -> tuple[int, str, bytes]:
    """``(status, content type, body)`` for ``GET target``; never raises (a bug is a 500)."""
    try:
        answer = service.handle(target)
    except Exception as exc:
        log.exception("query %s failed", target)
        return 500, JSON, f'{{"error": "internal error: {type(exc).__name__}"}}'.encode()
    return answer.status, JSON, answer.encode()


class QueryHttpServer(BackgroundHttpServer):
    """Serves ``/stores/...`` on ``host:port`` (0: any free port) on daemon threads."""

    def __init__(self, service: QueryService, host: str, port: int) -> None:
        super().__init__(
            host,
            port,
            _handler(service),
            what="the query server",
            port_key="job.query.port",
            thread_name="query-http",
        )
        self.service = service


def _handler(service: QueryService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.split("?", 1)[0].rstrip("/").startswith(PREFIX):
                code, content_type, body = route(service, self.path)
            else:
                code, content_type, body = 404, JSON, b'{"error": "not found: queries are under /stores"}'
            send(self, code, content_type, body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
            log.debug("query http: " + format, *args)

    return Handler

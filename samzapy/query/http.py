"""The HTTP side of interactive queries: a server of its own, or routes added to the
Prometheus reporter's server when both are configured on the same port."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from samzapy.errors import SamzapyError
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


class QueryHttpServer:
    """Serves ``/stores/...`` on ``host:port`` (0: any free port) on daemon threads."""

    def __init__(self, service: QueryService, host: str, port: int) -> None:
        self.service = service
        self.host = host
        self.requested_port = port
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        """The port listened on (the chosen one when configured as 0)."""
        assert self._server is not None
        return self._server.server_address[1]

    def start(self) -> None:
        """Bind and serve.

        Raises:
            SamzapyError: the port cannot be bound.
        """
        try:
            self._server = ThreadingHTTPServer((self.host, self.requested_port), _handler(self.service))
        except OSError as exc:
            msg = (
                f"the query server cannot listen on {self.host}:{self.requested_port} (job.query.port): "
                f"{exc.strerror or exc}; set another job.query.port, or 0 for any free port"
            )
            raise SamzapyError(msg) from exc
        self._server.daemon_threads = True
        thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="query-http", daemon=True
        )
        thread.start()

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(service: QueryService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.split("?", 1)[0].rstrip("/").startswith(PREFIX):
                code, content_type, body = route(service, self.path)
            else:
                code, content_type, body = 404, JSON, b'{"error": "not found: queries are under /stores"}'
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
            log.debug("query http: " + format, *args)

    return Handler

"""A small HTTP server on daemon threads, shared by the Prometheus reporter (``/metrics``,
``/health``) and the interactive queries (``/stores``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from samzapy.errors import SamzapyError

#: A route: the request target (path and query) -> (HTTP status, content type, body).
Route = Callable[[str], tuple[int, str, bytes]]


class BackgroundHttpServer:
    """Serves ``handler`` on ``host:port`` (0: any free port) from daemon threads.

    Args:
        host: address to bind.
        port: port to bind; 0 picks a free one (see :attr:`port`).
        handler: the request handler class.
        what: names the server in a bind error, e.g. ``"the query server"``.
        port_key: the configuration key of the port, named in a bind error.
        thread_name: the name of the serving thread.
    """

    def __init__(
        self,
        host: str,
        port: int,
        handler: type[BaseHTTPRequestHandler],
        *,
        what: str,
        port_key: str,
        thread_name: str,
    ) -> None:
        self.host = host
        self.requested_port = port
        self._handler = handler
        self._what = what
        self._port_key = port_key
        self._thread_name = thread_name
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        """The port listened on (the chosen one when configured as 0)."""
        assert self._server is not None
        return self._server.server_address[1]

    def start(self) -> None:
        """Bind the port and serve on a daemon thread.

        Raises:
            SamzapyError: the port cannot be bound (in use, or not allowed).
        """
        try:
            self._server = ThreadingHTTPServer((self.host, self.requested_port), self._handler)
        except OSError as exc:
            msg = (
                f"{self._what} cannot listen on {self.host}:{self.requested_port}: {exc.strerror or exc}; "
                f"set another {self._port_key} (or 0 for any free port)"
            )
            raise SamzapyError(msg) from exc
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=self._thread_name,
            daemon=True,
        ).start()

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def send(handler: BaseHTTPRequestHandler, code: int, content_type: str, body: bytes) -> None:
    """Write a complete response with ``Content-Type`` and ``Content-Length``."""
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)

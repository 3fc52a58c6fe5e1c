"""The container's HTTP surface.

One small server type for the Prometheus reporter (``/metrics``, ``/health``), the status page
(``/``, ``/status.json``) and the interactive queries (``/stores``).

It is safe to leave running on a shared network: each connection has a socket timeout, the
server serves at most ``max_connections`` at once (more get a 503 and are closed, so 400
half-sent requests cannot hold 400 threads), a burst of connections waits in a listen
backlog of :data:`LISTEN_BACKLOG` (not Python's 5, beyond which the kernel drops a SYN and
the client retries only after 1 s, a Kubernetes probe's whole default timeout), a client
that disconnects early is a DEBUG line rather than a traceback, error bodies are short plain
text that never echo a long request back, and guarded routes need the bearer token of
``job.http.auth.token.file``.
"""

from __future__ import annotations

import hmac
import http
import logging
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

from samzapy.errors import SamzapyError

log = logging.getLogger(__name__)

#: A route: (the request target (path and query), the request's headers) -> (HTTP status,
#: content type, body).
Route = Callable[[str, Mapping[str, str]], tuple[int, str, bytes]]

#: Connections served at once; more are answered 503 and closed.
MAX_CONNECTIONS = 64
#: Connections the kernel queues for the accept loop (``listen()``'s backlog; the kernel caps it
#: at ``net.core.somaxconn``). socketserver's default is 5.
LISTEN_BACKLOG = 1024
#: Seconds a connection may stay silent (a half-sent request) before it is closed.
SOCKET_TIMEOUT_S = 10.0
#: Characters of client input an error message may quote.
QUOTED_MAX = 80
TEXT = "text/plain; charset=utf-8"
_DISCONNECTS = (ConnectionError, TimeoutError, socket.timeout)


def clip(text: str, limit: int = QUOTED_MAX) -> str:
    """``text`` as an error message may quote it: at most ``limit`` characters.

    >>> clip("abc"), clip("x" * 100, 5)
    ('abc', 'xxxxx... (95 more characters)')
    """
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def read_token(path: Path) -> str:
    """The bearer token in ``path`` (``job.http.auth.token.file``), surrounding blanks removed.

    Raises:
        SamzapyError: the file cannot be read or is empty.
    """
    try:
        token = path.read_text().strip()
    except OSError as exc:
        msg = f"job.http.auth.token.file {path} cannot be read: {exc.strerror or exc}"
        raise SamzapyError(msg) from exc
    if not token:
        msg = f"job.http.auth.token.file {path} is empty: put the bearer token in it"
        raise SamzapyError(msg)
    return token


class BackgroundHttpServer:
    """Serves its routes on ``host:port`` (0: any free port) from daemon threads.

    Args:
        host: address to bind.
        port: port to bind; 0 picks a free one (see :attr:`port`).
        what: names the server in a bind error, e.g. ``"the query server"``.
        port_key: the configuration key of the port, named in a bind error.
        thread_name: the name of the serving thread.
        token: the bearer token guarded routes need (``None``: none needed).
        max_connections: connections served at once.
        timeout_s: socket timeout of a connection.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        what: str,
        port_key: str,
        thread_name: str,
        token: str | None = None,
        max_connections: int = MAX_CONNECTIONS,
        timeout_s: float = SOCKET_TIMEOUT_S,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.token = token
        self._what = what
        self._port_key = port_key
        self._thread_name = thread_name
        self._max_connections = max_connections
        self._timeout_s = timeout_s
        self._routes: dict[str, tuple[Route, bool, bool]] = {}  # path -> (route, prefix, guarded)
        self._server: _Server | None = None
        self._serving = False

    def add_route(self, path: str, route: Route, *, prefix: bool = False, guarded: bool = False) -> None:
        """Serve ``GET path`` (every path under it with ``prefix``) with ``route``.

        A ``guarded`` route needs the bearer token when one is configured.
        """
        self._routes[path] = (route, prefix, guarded)

    def has_route(self, path: str) -> bool:
        """Whether ``path`` is served already."""
        return path in self._routes

    @property
    def port(self) -> int:
        """The port listened on (the chosen one when configured as 0)."""
        assert self._server is not None
        return self._server.server_address[1]

    def listen(self) -> None:
        """Bind the port and listen, without serving yet.

        Connections queue in the backlog until :meth:`start` (which listens first if this was
        not called).

        Raises:
            SamzapyError: the port cannot be bound (in use, or not allowed).
        """
        if self._server is not None:
            return
        handler = type("Handler", (_Handler,), {"timeout": self._timeout_s, "surface": self})
        try:
            self._server = _Server((self.host, self.requested_port), handler, self._max_connections)
        except OSError as exc:
            msg = (
                f"{self._what} cannot listen on {self.host}:{self.requested_port}: {exc.strerror or exc}; "
                f"set another {self._port_key} (or 0 for any free port)"
            )
            raise SamzapyError(msg) from exc

    def start(self) -> None:
        """Bind the port (unless :meth:`listen` did) and serve on a daemon thread.

        Raises:
            SamzapyError: the port cannot be bound (in use, or not allowed).
        """
        self.listen()
        assert self._server is not None
        self._serving = True
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=self._thread_name,
            daemon=True,
        ).start()

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._server is not None:
            if self._serving:  # shutdown() waits for serve_forever, which listen() alone never ran
                self._server.shutdown()
            self._server.server_close()
            self._server = None
            self._serving = False

    def answer(self, target: str, headers: Mapping[str, str]) -> tuple[int, str, bytes, dict[str, str]]:
        """``(status, content type, body, extra headers)`` for ``GET target``; never raises."""
        path = urllib.parse.urlsplit(target).path.rstrip("/") or "/"
        found = self._match(path)
        if found is None:
            known = ", ".join(sorted(self._routes))
            return 404, TEXT, f"not found: {clip(path)} (this port serves {known})\n".encode(), {}
        route, _, guarded = found
        if guarded and self.token is not None and not self._authorised(target, headers.get("Authorization")):
            body = b"401 Unauthorized: send 'Authorization: Bearer <token>' (job.http.auth.token.file)\n"
            return 401, TEXT, body, {"WWW-Authenticate": 'Bearer realm="samzapy"'}
        try:
            status, content_type, body = route(target, headers)
        except Exception as exc:
            log.exception("HTTP GET %s failed", clip(target))
            return (
                500,
                TEXT,
                f"500 internal error: {type(exc).__name__} (the job's log has the traceback)\n".encode(),
                {},
            )
        return status, content_type, body, {}

    def _match(self, path: str) -> tuple[Route, bool, bool] | None:
        for known, found in sorted(self._routes.items(), key=lambda item: -len(item[0])):
            if path == known or (found[1] and path.startswith(known.rstrip("/") + "/")):
                return found
        return None

    def _authorised(self, target: str, authorization: str | None) -> bool:
        """The token as ``Authorization: Bearer <token>``, or as ``?token=``.

        A browser opening the status page cannot set a header; the page sends the header on its
        own fetches.
        """
        assert self.token is not None
        offered = ""
        if authorization and authorization.lower().startswith("bearer "):
            offered = authorization[7:].strip()
        else:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
            offered = query.get("token", [""])[-1]
        return hmac.compare_digest(offered.encode(), self.token.encode())


class _Server(ThreadingHTTPServer):
    """Threads per connection, at most ``max_connections`` of them."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._max_connections = max_connections
        self._refused = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        self._refused += 1
        (log.warning if self._refused == 1 else log.debug)(
            "HTTP: all %d connections busy, refusing one (503); %d refused so far",
            self._max_connections,
            self._refused,
        )
        body = b"503 Service Unavailable: too many connections\n"
        head = f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: {TEXT}\r\nContent-Length: {len(body)}\r\n"
        try:
            request.settimeout(1.0)
            request.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is not an error of the job; anything else is logged once."""
        error = sys.exc_info()[1]
        if isinstance(error, _DISCONNECTS):
            log.debug("HTTP client %s went away: %s", client_address, error)
        else:
            log.error("HTTP connection from %s failed", client_address, exc_info=error)


class _Handler(BaseHTTPRequestHandler):
    """GET through the routes of :attr:`surface`; any other method is a 405."""

    surface: BackgroundHttpServer
    server_version = "samzapy"
    sys_version = ""

    def handle(self) -> None:
        try:
            super().handle()
        except _DISCONNECTS as exc:
            log.debug("HTTP client %s went away: %s", self.client_address, exc)
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        # an email.message.Message: read through get() and [] as a mapping of header names
        request_headers = cast(Mapping[str, str], self.headers)
        status, content_type, body, headers = self.surface.answer(self.path, request_headers)
        send(self, status, content_type, body, headers)

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_error(405, "only GET is served")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD  # noqa: N815

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Short plain text naming the problem (http.server's own page quotes the request)."""
        try:
            phrase = http.HTTPStatus(code).phrase
        except ValueError:
            phrase = "Error"
        reason = f": {clip(message)}" if message else ""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # a malformed request line: answer with a status line
            self.request_version = "HTTP/1.0"
        send(self, code, TEXT, f"{code} {phrase}{reason}\n".encode(), {"Connection": "close"})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
        log.debug("http %s: " + format, self.client_address[0], *args)


def send(
    handler: BaseHTTPRequestHandler,
    code: int,
    content_type: str,
    body: bytes,
    headers: dict[str, str] | None = None,
) -> None:
    """Write a complete response with ``Content-Type`` and ``Content-Length``."""
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("Cache-Control", "no-store")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)

"""Every core of a host: N group-mode members of one job under one parent.

One Python process runs one core's worth of a job (the GIL). ``samzapy run --processes N``
(or ``job.processes.per.host=N``) makes the command a parent that starts N members of the
job's consumer group on this host, each a ``samzapy run`` of its own (so each has its own
tasks, stores, producer and core), and:

1. **forwards signals**: SIGTERM and SIGINT to the parent go to every member as SIGTERM
   (each commits and stops); the members run in a process group of their own, so that a
   terminal's Ctrl-C reaches them through the parent only (once), and they get SIGTERM from
   the kernel if the parent dies (Linux's parent-death signal);
2. **restarts a member that crashed** (any exit the parent did not ask for, but a clean
   ``--exit-at-end`` finish): at once the first time, then after a pause that doubles to
   :data:`MAX_RESTART_DELAY_S` while it keeps failing within :data:`HEALTHY_AFTER_S` of its
   start. The group moves the dead member's tasks to the others and back to the new member,
   restored from their changelogs (local checkpoints on this host make that short);
3. **serves one status page and one** ``/metrics`` on the job's configured ports (its
   Prometheus reporters', ``job.query.port``), merged from the members' own, which each serve
   on a loopback port the parent chose (:mod:`samzapy.container.process_pages`).

Members get their own ``--instance-id`` (``<id>-<index>``) when the job has one, their own
``--metrics-file`` (``<stem>-<index><suffix>``), and loopback ports; interactive queries
(``/stores``) stay on each member's loopback port and are not proxied.

The parent's exit code: 0 when every member ended with 0 (stopped by a signal, or at the end
of its input), else the first other code.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from samzapy.config.model import JobConfig
from samzapy.container.process_pages import Member, merged_health, merged_metrics, merged_status
from samzapy.http_server import TEXT, BackgroundHttpServer, read_token

log = logging.getLogger(__name__)

#: The longest pause before restarting a member that keeps crashing.
MAX_RESTART_DELAY_S = 30.0
#: A member that ran this long before it crashed is restarted at once.
HEALTHY_AFTER_S = 10.0
#: Seconds between two looks at the members.
POLL_S = 0.2
_PR_SET_PDEATHSIG = 1
#: (override key, value) pairs a member gets besides the job's configuration.
Overrides = list[tuple[str, str]]
#: Makes member ``index``'s command line from its extra overrides.
MemberCommand = Callable[[int, Overrides], list[str]]


def _loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _libc_prctl() -> Callable[..., int] | None:
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: members then outlive a killed parent
    return prctl


#: Looked up once here: the forked child must not load libraries (another thread of the
#: parent may hold the loader's lock at the fork).
_PRCTL = _libc_prctl()


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """In a member before exec.

    SIGTERM when the parent dies (a kill -9 of the parent must not leave members running
    unsupervised).
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class _Member:
    index: int
    overrides: Overrides
    page_url: str | None
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    delay_s: float = 0.0
    restart_at: float | None = None
    finished: int | None = None  # exit code of a member that is done (not to be restarted)
    codes: list[int] = field(default_factory=list)


class ProcessGroup:
    """Runs ``count`` members of ``job`` (group mode) on this host; see the module doc.

    ``command(index, overrides)`` gives member ``index``'s command line: the parent's own
    ``samzapy run`` arguments for one process (its instance id and metrics file, see
    :func:`member_metrics_file`), with ``overrides`` added as ``--config KEY=VALUE``.
    ``exit_at_end``: a member that exits 0 is done, not restarted. Not thread-safe: one parent
    thread runs :meth:`run`.
    """

    def __init__(
        self, job: JobConfig, count: int, command: MemberCommand, *, exit_at_end: bool = False
    ) -> None:
        self.job = job
        self.count = count
        self._command = command
        self._exit_at_end = exit_at_end
        self._stopping = False
        self._token = None if job.http_auth_token_file is None else read_token(job.http_auth_token_file)
        self._members = [self._plan(index) for index in range(count)]
        self._servers: list[BackgroundHttpServer] = []

    def _plan(self, index: int) -> _Member:
        """Member ``index``'s loopback ports for the HTTP surfaces the job configures."""
        overrides: Overrides = []
        page = None
        for spec in self.job.reporters:
            if spec.kind == "prometheus":
                port = _loopback_port()
                overrides += [(f"metrics.reporter.{spec.name}.port", str(port))]
                overrides += [(f"metrics.reporter.{spec.name}.host", "127.0.0.1")]
                page = page or f"http://127.0.0.1:{port}"
        if self.job.query_port is not None:
            port = _loopback_port()
            overrides += [("job.query.port", str(port)), ("job.query.host", "127.0.0.1")]
            page = page or f"http://127.0.0.1:{port}"
        return _Member(index, overrides, page)

    # -- life cycle ---------------------------------------------------------------------------

    def run(self) -> int:
        """Start the members and the pages, supervise until every member has ended; the exit code."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for member in self._members:
                self._start(member)
            self._serve()
            while not all(m.finished is not None for m in self._members):
                self._look()
                time.sleep(POLL_S)
        finally:
            for server in self._servers:
                server.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        codes = [m.finished for m in self._members if m.finished]
        log.info("all %d processes stopped%s", self.count, f"; exit codes {codes}" if codes else "")
        return codes[0] if codes else 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        log.info("%s received: stopping the %d processes (each commits first)", name, self.count)
        self._stopping = True
        for member in self._members:
            if member.process is not None and member.process.poll() is None:
                member.process.send_signal(signal.SIGTERM)
            elif member.finished is None:
                member.finished = 0  # waiting for a restart: not started again

    def _start(self, member: _Member) -> None:
        command = self._command(member.index, member.overrides)
        member.process = subprocess.Popen(command, process_group=0, preexec_fn=_die_with_parent)  # noqa: PLW1509
        member.started = time.monotonic()
        member.restart_at = None
        log.info("process %d of %d started (pid %d)", member.index, self.count, member.process.pid)

    def _look(self) -> None:
        """Reap the members that ended; restart those that crashed when their pause is over."""
        now = time.monotonic()
        for member in self._members:
            if member.finished is not None:
                continue
            if member.process is None:
                if member.restart_at is not None and now >= member.restart_at and not self._stopping:
                    self._start(member)
                continue
            code = member.process.poll()
            if code is None:
                continue
            member.process = None
            member.codes.append(code)
            if self._stopping or (code == 0 and self._exit_at_end):
                member.finished = code
                continue
            self._schedule_restart(member, code, now)

    def _schedule_restart(self, member: _Member, code: int, now: float) -> None:
        ran = now - member.started
        # The first restart and one after a healthy run are at once; then the pause doubles.
        quick = member.restarts == 0 or ran >= HEALTHY_AFTER_S
        member.delay_s = 0.0 if quick else min(max(member.delay_s * 2, 1.0), MAX_RESTART_DELAY_S)
        member.restarts += 1
        member.restart_at = now + member.delay_s
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        log.warning(
            "process %d ended unasked (%s, after %.1f s): restarting it%s (restart %d)",
            member.index,
            how,
            ran,
            f" in {member.delay_s:.0f} s" if member.delay_s else "",
            member.restarts,
        )

    # -- the pages ----------------------------------------------------------------------------

    def members(self) -> list[Member]:
        """The members as the pages see them (index, page URL, pid of the running process)."""
        return [
            Member(m.index, m.page_url, None if m.process is None else m.process.pid) for m in self._members
        ]

    def _serve(self) -> None:
        """Serve the merged pages on each distinct configured port (see the module doc)."""
        addresses = {(s.host, s.port) for s in self.job.reporters if s.kind == "prometheus"}
        if self.job.query_port is not None:
            addresses.add((self.job.query_host, self.job.query_port))
        for host, port in sorted(addresses):
            server = BackgroundHttpServer(
                host,
                port,
                what="the processes' pages",
                port_key="metrics.reporter.<reporter>.port / job.query.port",
                thread_name=f"process-pages-{port}",
                token=self._token,
            )
            self._add_routes(server)
            server.start()
            self._servers.append(server)
            log.info(
                "status page and /metrics of the %d processes at http://%s:%d/", self.count, host, server.port
            )

    def _add_routes(self, server: BackgroundHttpServer) -> None:
        from samzapy.status.serving import HTML, JSON, page

        def metrics(target: str, headers: object) -> tuple[int, str, bytes]:
            return (
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                merged_metrics(self.members(), self._token),
            )

        def health(target: str, headers: object) -> tuple[int, str, bytes]:
            code, body = merged_health(self.members(), self._token)
            return code, TEXT, body

        def status(target: str, headers: object) -> tuple[int, str, bytes]:
            document = merged_status(self.members(), self._token)
            if document is None:
                return 503, TEXT, b"no process answers yet\n"
            return 200, JSON, json.dumps(document, default=str).encode()

        server.add_route("/metrics", metrics)
        server.add_route("/health", health)
        server.add_route("/", lambda target, headers: (200, HTML, page()), guarded=True)
        server.add_route("/status.json", status, guarded=True)


def member_metrics_file(path: os.PathLike[str] | str, index: int) -> str:
    """Member ``index``'s ``--metrics-file``: ``<stem>-<index><suffix>`` beside ``path``.

    >>> member_metrics_file("/tmp/m.json", 1)
    '/tmp/m-1.json'
    """
    text = os.fspath(path)
    head, dot, suffix = text.rpartition(".")
    if not dot or "/" in suffix:
        return f"{text}-{index}"
    return f"{head}-{index}.{suffix}"


def member_command(
    job: JobConfig,
    *,
    config: str | None,
    config_path: str | None,
    overrides: tuple[str, ...],
    exit_at_end: bool,
    metrics_file: os.PathLike[str] | str | None,
    instance_id: str | None,
) -> MemberCommand:
    """The command line of each member: the parent's ``samzapy run`` for one process.

    The same configuration and overrides, ``--processes 1``, member ``index``'s metrics file
    (:func:`member_metrics_file`) and instance id (``<id>-<index>``, when the job or the
    parent has one), and the member's own overrides (its loopback ports).
    """
    member_id = instance_id or job.instance_id

    def command(index: int, extra: Overrides) -> list[str]:
        args = [sys.executable, "-m", "samzapy", "run"]
        args += [] if config is None else [config]
        args += [] if config_path is None else ["--config-path", config_path]
        for override in [*overrides, *(f"{key}={value}" for key, value in extra)]:
            args += ["--config", override]
        args += ["--processes", "1"]
        args += ["--exit-at-end"] if exit_at_end else []
        args += [] if metrics_file is None else ["--metrics-file", member_metrics_file(metrics_file, index)]
        args += [] if member_id is None else ["--instance-id", f"{member_id}-{index}"]
        return args

    return command

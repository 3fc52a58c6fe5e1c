"""One running copy of a passthrough container per state directory.

Two ``samzapy run`` of the same job and container id on one machine would fight over the
same tasks: the second takes them over through the ownership generation
(:mod:`samzapy.container.fencing`), waits on the first one's RocksDB locks, and the first
learns it was displaced only at its next commit. So ``samzapy run`` in passthrough mode first
takes an exclusive lock on ``<job.logged.store.base.dir>/.samzapy-<job>-<id>-container-<N>.lock``
and writes who holds it (host, pid, since when) into that file. A second copy finds the lock
taken and stops at once (:class:`AlreadyRunning`, exit 2) naming the running copy and the two
ways on: stop it, or start with ``--take-over``, which asks it to stop (SIGTERM: it commits and
exits) and waits for its lock.

The lock is an ``flock`` on an open descriptor: the kernel drops it when the process dies, even
by ``kill -9``, so a crashed copy never leaves a stale lock behind (the file stays, harmlessly).
``flock`` and RocksDB's ``fcntl`` locks do not interact. It guards one machine's state
directory; copies on two machines are still kept apart by the ownership generation. Group mode
takes no lock: a second member is welcome and simply joins the group.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from samzapy.errors import BadArgumentError, SamzapyError

log = logging.getLogger(__name__)

#: How long ``--take-over`` waits for the running copy to stop (it commits first).
TAKE_OVER_WAIT_S = 120.0
_POLL_S = 0.1


@dataclass(frozen=True)
class RunningCopy:
    """Who holds a container's lock, as it wrote it when it took the lock."""

    host: str
    pid: int
    since: float  # seconds since the epoch

    def describe(self) -> str:
        """``host vm1, pid 123, since 2026-01-01 12:00:00 UTC``."""
        started = datetime.fromtimestamp(self.since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"host {self.host}, pid {self.pid}, since {started}"


class AlreadyRunning(BadArgumentError):
    """Another copy of this job's container runs on this machine (exit 2)."""

    def __init__(self, what: str, holder: RunningCopy | None, lock_path: Path) -> None:
        who = holder.describe() if holder else "its details not written yet: it is starting"
        stop = f"kill {holder.pid}" if holder else "stop it"
        super().__init__(
            f"{what} already runs ({who}; lock {lock_path}): stop it first ({stop}, or Ctrl-C "
            "where it runs), or start this one with --take-over to stop it and take its tasks"
        )
        self.holder = holder


class TakeOverFailed(SamzapyError):
    """``--take-over`` could not stop the running copy (exit 1)."""


def lock_path(base_dir: Path, job_name: str, job_id: str, container_id: int) -> Path:
    """The lock file of one container of one job in ``base_dir``.

    >>> lock_path(Path("state"), "my job", "1", 0).name
    '.samzapy-my_job-1-container-0.lock'
    """
    job = f"{job_name}-{job_id}".replace(" ", "_").replace("/", "_")
    return base_dir / f".samzapy-{job}-container-{container_id}.lock"


class InstanceLock:
    """The exclusive lock of one container of a job (see the module doc); a context manager.

    Args:
        path: the lock file (:func:`lock_path`).
        what: how errors name the container (``job 'x' (id 1), container 0``).
    """

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    def acquire(self, take_over: bool = False, wait_s: float = TAKE_OVER_WAIT_S) -> None:
        """Take the lock, or raise :class:`AlreadyRunning` naming the copy that holds it.

        With ``take_over``, a copy that holds it is sent SIGTERM and the lock waited for (at
        most ``wait_s``); :class:`TakeOverFailed` when it cannot be signalled or does not stop.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _try_lock(fd):
                holder = self.holder()
                if not take_over:
                    raise AlreadyRunning(self.what, holder, self.path)
                self._take_over(fd, holder, wait_s)
            os.ftruncate(fd, 0)
            mine = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
            os.pwrite(fd, json.dumps(mine).encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _take_over(self, fd: int, holder: RunningCopy | None, wait_s: float) -> None:
        if holder is None or holder.host != socket.gethostname():
            where = holder.describe() if holder else "unknown"
            msg = f"--take-over: cannot signal the running copy of {self.what} ({where}): stop it yourself"
            raise TakeOverFailed(msg)
        log.info("--take-over: asking the running copy (%s) to stop", holder.describe())
        try:
            os.kill(holder.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # gone already: its lock is about to be (or is) free
        except PermissionError as exc:
            msg = f"--take-over: not allowed to stop pid {holder.pid} ({exc}): stop it yourself"
            raise TakeOverFailed(msg) from exc
        deadline = time.monotonic() + wait_s
        while not _try_lock(fd):
            if time.monotonic() > deadline:
                msg = (
                    f"--take-over: the running copy ({holder.describe()}) did not stop within {wait_s:.0f} s"
                )
                raise TakeOverFailed(msg)
            time.sleep(_POLL_S)
        log.info("--take-over: the running copy stopped; taking its tasks")

    def holder(self) -> RunningCopy | None:
        """Who holds the lock as written in the file; ``None`` while it is not written yet."""
        try:
            data = json.loads(self.path.read_text() or "null")
            return RunningCopy(str(data["host"]), int(data["pid"]), float(data["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def release(self) -> None:
        """Drop the lock (closing the descriptor does; the file stays)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> InstanceLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True

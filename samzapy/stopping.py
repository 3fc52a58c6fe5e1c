"""A process-wide "stop was requested" flag, for waits that happen before a container loops.

The container's SIGTERM/SIGINT handler sets it; code that waits during start-up (a broker
retried with backoff, :func:`samzapy.kafka.admin.retry_unreachable`) waits on it instead of
sleeping, so a stop is honoured within one connection attempt rather than after the whole
retry deadline (in Kubernetes, a pod that ignores SIGTERM is SIGKILLed).
"""

from __future__ import annotations

import threading

_event = threading.Event()
_reason: list[str] = []


def request_stop(reason: str) -> None:
    """Ask every waiting start-up step to give up (``reason``: e.g. ``"SIGTERM received"``)."""
    _reason[:] = [reason]
    _event.set()


def stop_reason() -> str | None:
    """Why a stop was requested, or ``None`` when none was."""
    return _reason[0] if _event.is_set() and _reason else None


def wait(seconds: float) -> bool:
    """Sleep ``seconds`` unless a stop is requested meanwhile; ``True`` when it was."""
    return _event.wait(seconds)


def reset() -> None:
    """Forget an earlier request (a new container starts)."""
    _reason.clear()
    _event.clear()

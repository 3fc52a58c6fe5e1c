"""Named crash points for crash tests: ``SAMZAPY_CRASH_AT=name[:n]`` kills the process the
n-th time (default the first) execution reaches ``crash_point(name)``.

The kill is a real SIGKILL of the process itself, so nothing is flushed or closed: exactly
what ``kill -9`` at that instruction would do. Unset, a crash point costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

_target = os.environ.get("SAMZAPY_CRASH_AT", "")
_name, _, _count = _target.partition(":")
_remaining = int(_count) if _count.isdigit() else 1
_hits: dict[str, int] = {}

#: The crash points samzapy defines, for tests and documentation.
KNOWN = (
    "after-changelog-send",  # a changelog record handed to the producer, not yet flushed
    "after-producer-flush",  # everything acknowledged, no checkpoint written yet
    "after-local-checkpoint",  # local store checkpoints written, Kafka checkpoint not yet
    "during-restore",  # part of a changelog replayed into the store
    "during-trim",  # part of the uncommitted changelog tail undone
    "during-side-input-restore",  # a batch of a side input applied at start-up, more to read
)


def crash_point(name: str) -> None:
    """SIGKILL this process if ``SAMZAPY_CRASH_AT`` names ``name`` and its count is reached."""
    if name != _name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= _remaining:
        os.kill(os.getpid(), signal.SIGKILL)

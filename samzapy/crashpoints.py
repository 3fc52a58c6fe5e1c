"""Named crash and pause points for fault tests.

``SAMZAPY_CRASH_AT=name[:n]`` kills the process the n-th time (default the first) execution
reaches ``crash_point(name)``. The kill is a real SIGKILL of the process itself, so nothing is
flushed or closed: exactly what ``kill -9`` at that instruction would do.

``SAMZAPY_PAUSE_AT=name[:n]`` stops the process (SIGSTOP to itself) the n-th time execution
reaches ``pause_point(name)``: every thread halts there, as under ``kill -STOP`` at that
instruction, until a SIGCONT from outside (the test) resumes it. A test uses it to hold a
container at an exact place, e.g. between its fencing check and its checkpoint write, while
another container takes its tasks over. The process writes one line to stderr just before it
stops, so the test can wait for it.

``SAMZAPY_SLOW_AT=name:seconds`` sleeps that long each time execution reaches
``crash_point(name)``, with every other thread running: a test uses it to watch a long phase
(a restore) from outside, e.g. on the status page.

Unset, a crash or pause point costs one string comparison (two for a crash point).
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _parse(variable: str) -> tuple[str, int]:
    name, _, count = os.environ.get(variable, "").partition(":")
    return name, int(count) if count.isdigit() else 1


_name, _remaining = _parse("SAMZAPY_CRASH_AT")
_pause_name, _pause_at = _parse("SAMZAPY_PAUSE_AT")
_slow_name, _, _slow_s = os.environ.get("SAMZAPY_SLOW_AT", "").partition(":")
_hits: dict[str, int] = {}
_pause_hits: dict[str, int] = {}

#: The crash points samzapy defines, for tests and documentation.
KNOWN = (
    "after-changelog-send",  # a changelog record handed to the producer, not yet flushed
    "after-producer-flush",  # everything acknowledged, no checkpoint written yet
    "after-local-checkpoint",  # local store checkpoints written, Kafka checkpoint not yet
    "during-restore",  # part of a changelog replayed into the store
    "during-trim",  # part of the uncommitted changelog tail undone
    "during-side-input-restore",  # a batch of a side input applied at start-up, more to read
    "during-snapshot-upload",  # some files of a store snapshot sent to the blob store, no index yet
)

#: The pause points samzapy defines.
KNOWN_PAUSES = (
    "after-fence-check",  # a commit found its tasks still owned; no store flushed, no checkpoint yet
    "after-poll",  # records polled, not yet handed to their tasks
)

#: What a pause point writes to stderr before it stops the process.
PAUSED_LINE = "samzapy: paused at {name} (SAMZAPY_PAUSE_AT); send SIGCONT to resume"


def crash_point(name: str) -> None:
    """SIGKILL this process if ``SAMZAPY_CRASH_AT`` names ``name`` and its count is reached.

    Sleep first if ``SAMZAPY_SLOW_AT`` names it.
    """
    if name == _slow_name:
        time.sleep(float(_slow_s or 1))
    if name != _name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= _remaining:
        os.kill(os.getpid(), signal.SIGKILL)


def pause_point(name: str) -> None:
    """SIGSTOP this process if ``SAMZAPY_PAUSE_AT`` names ``name`` at its n-th pass.

    Once: later passes go on.
    """
    if name != _pause_name:
        return
    _pause_hits[name] = _pause_hits.get(name, 0) + 1
    if _pause_hits[name] == _pause_at:
        sys.stderr.write(PAUSED_LINE.format(name=name) + "\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSTOP)

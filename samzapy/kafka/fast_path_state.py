"""Which of samzapy's Kafka fast paths are on in this process, and why not.

samzapy has two fast paths that reach into client internals (see their modules):

- ``producer-append`` (:mod:`samzapy.kafka.fast_append`): records appended straight to
  kafka-python's record accumulator, about 4x cheaper than ``KafkaProducer.send``;
- ``consumer-decode`` (:mod:`samzapy.kafka.fast_decode`): fetched record batches decoded by
  aiokafka's C decoder instead of kafka-python's Python one.

Both rely on private parts of pinned client versions. When a path cannot be used (another
client version, a missing C extension, switched off by an environment variable) samzapy still
works, only slower; this module says so instead of staying silent: :func:`fast_paths` answers
for code and tests, :func:`log_fast_paths` writes one INFO line per path, once per process,
when the first producer or reader consumer is made.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from samzapy.kafka import fast_append

log = logging.getLogger(__name__)

#: The decoder's name, known here even when its module does not import.
CONSUMER_DECODE = "consumer-decode"

_logged = False
_log_lock = threading.Lock()


@dataclass(frozen=True)
class FastPath:
    """The state of one fast path in this process.

    Attributes:
        name: ``producer-append`` or ``consumer-decode``.
        active: whether new producers / reader consumers use it.
        reason: what it runs on when active; why it is off otherwise (with the fix).
    """

    name: str
    active: bool
    reason: str

    def describe(self) -> str:
        """One line for a log: ``consumer-decode: on (kafka-python 3.0.12 ...)``."""
        return f"{self.name}: {'on' if self.active else 'OFF'} ({self.reason})"


def _decoder_module() -> tuple[ModuleType | None, str | None]:
    """:mod:`samzapy.kafka.fast_decode`, or ``None`` and why it does not import.

    It imports kafka-python internals that other kafka-python versions do not have.
    """
    try:
        fast_decode = importlib.import_module("samzapy.kafka.fast_decode")
    except ImportError as exc:
        return None, (
            f"kafka-python internals it needs do not import ({type(exc).__name__}: {exc}): install "
            "the kafka-python range pyproject.toml pins"
        )
    return fast_decode, None


def producer_append() -> FastPath:
    """The state of the producer's fast path."""
    reason = fast_append.off_reason()
    if reason is not None:
        return FastPath(fast_append.NAME, False, reason)
    return FastPath(fast_append.NAME, True, fast_append.on_reason())


def consumer_decode() -> FastPath:
    """The state of the reader consumers' C decoder."""
    module, error = _decoder_module()
    if module is None:
        return FastPath(CONSUMER_DECODE, False, error or "")
    reason = module.off_reason()
    if reason is not None:
        return FastPath(module.NAME, False, reason)
    return FastPath(module.NAME, True, module.on_reason())


def fast_paths() -> list[FastPath]:
    """Every fast path and its state, read now (environment switches included).

    >>> [p.name for p in fast_paths()]
    ['producer-append', 'consumer-decode']
    """
    return [producer_append(), consumer_decode()]


def install_decoder(consumer: Any, *, raw: bool = False, native: bool = False) -> bool:
    """Make ``consumer`` decode with the C decoder when the decoder is on; returns whether it does.

    See :func:`samzapy.kafka.fast_decode.install`; ``raw``: into ``RawRecord``s; ``native``: into
    the decoder's own record objects.
    """
    module, _ = _decoder_module()
    return module is not None and bool(module.install(consumer, raw=raw, native=native))


def log_fast_paths() -> None:
    """Log every fast path's state once per process.

    One INFO line for each path that is off (the run is slower than it could be, and says why),
    DEBUG for those that are on (a healthy run's console stays quiet).
    """
    global _logged
    with _log_lock:
        if _logged:
            return
        _logged = True
    for path in fast_paths():
        log.log(logging.DEBUG if path.active else logging.INFO, "fast path %s", path.describe())

"""The Kafka system on kafka-python: consumers, producer, admin, partitioner, dev broker.

:func:`fast_paths` tells which of the client fast paths (``producer-append``,
``consumer-decode``) are on in this process, and why not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samzapy.kafka.fast_path_state import FastPath, fast_paths

__all__ = ["FastPath", "fast_paths"]


def __getattr__(name: str) -> Any:
    # Lazily: the fast paths import kafka-python (~0.1 s of CPU), which `samzapy --help` and
    # `samzapy broker` (samzapy.kafka.broker) do not need.
    if name in __all__:
        from samzapy.kafka import fast_path_state

        return getattr(fast_path_state, name)
    msg = f"module 'samzapy.kafka' has no attribute {name!r}"
    raise AttributeError(msg)

"""The Kafka system on kafka-python: consumers, producer, admin, partitioner, dev broker.

:func:`fast_paths` tells which of the client fast paths (``producer-append``,
``consumer-decode``) are on in this process, and why not.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

# kafka-python 3.0 reads its protocol schemas with importlib.resources calls deprecated since
# Python 3.11: ~200 DeprecationWarnings at its first import, which bury the summary of a user's
# pytest run (pytest shows DeprecationWarnings). samzapy imports kafka-python in this package's
# modules (and the group coordinator's, which only a running job reaches). The filters name
# where the warnings come from (kafka-python's modules, and read_text's own call of
# open_text), so a user's own warnings still show.
warnings.filterwarnings("ignore", "read_text is deprecated", DeprecationWarning, r"kafka\.")
warnings.filterwarnings("ignore", "open_text is deprecated", DeprecationWarning, r"importlib\.resources")

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

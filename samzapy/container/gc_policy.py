"""How ``samzapy run`` sets Python's cyclic garbage collector for a long-running job.

CPython runs a young-generation collection every 700 allocations net of frees, and a full one
whenever the survivors grow by a quarter of the old generation. A job allocates a handful of
objects for every message and window (envelopes, decoded values, store entries, output
records) that are nearly all freed by reference counting, yet each collection walks every
young object, and the full ones walk the whole heap: the modules, the client libraries and
the caches of a container, hundreds of thousands of objects. Measured on the window count
with 200k keys (round 5): about a tenth of the job's CPU.

The policy: what exists once the container has started is moved out of the collector's sight
(``gc.freeze()``: modules and start-up objects are never garbage), and a young collection
runs every :data:`YOUNG_THRESHOLD` allocations instead of 700. Reference cycles are still
collected, only later and in larger batches; the memory they hold meanwhile is bounded by
that threshold's objects. ``SAMZAPY_GC=python`` keeps Python's own settings.
"""

from __future__ import annotations

import gc
import logging
import os

log = logging.getLogger(__name__)

#: Net allocations between two young-generation collections (Python's default: 700).
YOUNG_THRESHOLD = 50_000
#: Young collections per middle one, middle ones per full one (Python's: 10, 10).
OLDER_THRESHOLDS = (20, 100)


def apply_run_policy() -> bool:
    """Set the collector as the module doc says, unless ``SAMZAPY_GC=python``; whether it did."""
    if os.environ.get("SAMZAPY_GC", "") == "python":
        log.debug("garbage collector: Python's own thresholds (SAMZAPY_GC=python)")
        return False
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    return True

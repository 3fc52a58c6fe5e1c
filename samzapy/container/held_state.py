"""What this member holds on disk, for the group's leader (Kafka Streams' task offset sums).

Per task, how fresh the newest local copy of its stores is.
"""

from __future__ import annotations

from samzapy.config import JobConfig
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.paths import standby_dir, store_dir


def held_state(job: JobConfig, task_count: int) -> dict[int, int]:
    """How fresh each task's local copy is: an offset sum per task (partition number).

    Per task with a local copy of every logged RocksDB store, the sum over those stores of the
    changelog offset of the newest local checkpoint, its own or a standby's (higher is fresher).
    Tasks without such a copy of each store are left out.
    """
    logged = [
        (s.name, s.changelog.stream)
        for s in job.stores.values()
        if s.changelog is not None and s.engine == "rocksdb"
    ]
    if not logged:
        return {}
    held: dict[int, int] = {}
    for partition in range(task_count):
        offsets = [_newest(job, name, topic, partition) for name, topic in logged]
        if all(o is not None for o in offsets):
            held[partition] = sum(o for o in offsets if o is not None)
    return held


def _newest(job: JobConfig, store: str, topic: str, partition: int) -> int | None:
    found = [
        checkpoints[0].offset
        for directory in (
            store_dir(job.logged_store_base_dir, store, partition),
            standby_dir(job.logged_store_base_dir, store, partition),
        )
        if (checkpoints := LocalCheckpoints(directory, topic, partition).newest_first())
    ]
    return max(found, default=None)

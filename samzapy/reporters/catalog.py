"""What each of samzapy's metrics means, and how Prometheus sees it.

Samza's metric names (``process-ns``, ``restore-time``, ``bytes-written``) stay the names of
the registry, the JSON snapshots and the log reporter. Prometheus users expect base units and
``_total`` on counters, so the Prometheus reporter renames through this catalogue:
``process-ns`` of a task becomes ``samzapy_task_process_seconds_total`` (nanoseconds / 1e9),
``restore-time`` (ms) ``samzapy_store_restore_seconds``. A metric a task defines itself
(``context.metrics``) is not in the catalogue: it keeps its name and a generic HELP text.
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"


@dataclass(frozen=True)
class MetricDoc:
    """How one registry metric is exported.

    Attributes:
        help: the HELP text.
        kind: the Prometheus type (a sum of counters kept as a registry gauge is a counter).
        name: the exported name's stem (``-`` -> ``_``); the unit and ``_total`` are appended.
        unit: ``seconds``, ``bytes`` or ``""`` (a count).
        scale: multiplies the registry's value into the unit (ns -> s: 1e-9).
    """

    help: str
    kind: str
    name: str
    unit: str = ""
    scale: float = 1.0

    def exported(self, prefix: str) -> str:
        """The Prometheus family name under ``prefix`` (``samzapy_task``), without ``_total``."""
        return "_".join(part for part in (prefix, self.name.replace("-", "_"), self.unit) if part)


def _c(help: str, name: str, unit: str = "", scale: float = 1.0) -> MetricDoc:  # noqa: A002
    return MetricDoc(help, COUNTER, name, unit, scale)


def _g(help: str, name: str, unit: str = "", scale: float = 1.0) -> MetricDoc:  # noqa: A002
    return MetricDoc(help, GAUGE, name, unit, scale)


_NS = 1e-9

#: Every metric samzapy itself registers, by its registry name.
CATALOG: dict[str, MetricDoc] = {
    # tasks (and their sums in the container group)
    "messages-actually-processed": _c("Messages processed by process().", "messages-actually-processed"),
    "process-calls": _c("Calls of process() (Samza's process-calls).", "process-calls"),
    "process-ns": _c("Time spent in process().", "process", "seconds", _NS),
    "window-calls": _c("Calls of window().", "window-calls"),
    "window-ns": _c("Time spent in window().", "window", "seconds", _NS),
    "skipped-messages": _c("Failed messages skipped by the error policy.", "skipped-messages"),
    "dead-lettered": _c("Failed messages sent to the dead-letter stream.", "dead-lettered"),
    "dead-letter-references": _c(
        "Messages too large for the dead-letter stream, sent there as a reference.", "dead-letter-references"
    ),
    "producer-errors-dropped": _c(
        "Outputs the producer refused, dropped (task.drop.producer.errors).", "producer-errors-dropped"
    ),
    "rebalance-pause-s": _g(
        "Group mode: how long the task waited between its assignment and its first message.",
        "rebalance-pause",
        "seconds",
    ),
    "late-messages": _c("Messages behind the watermark, dropped by a window.", "late-messages"),
    "late-window-drops": _c("Updates of windows already closed, dropped.", "late-window-drops"),
    "late-join-records": _c("Join records later than the join's grace, dropped.", "late-join-records"),
    "fk-join-stale-responses": _c(
        "Foreign-key join responses superseded by a newer left value, dropped.", "fk-join-stale-responses"
    ),
    "duplicates": _c("Messages the deduplication operator found already seen, dropped.", "duplicates"),
    "dedup-too-old": _c("Messages older than the deduplication window, dropped.", "dedup-too-old"),
    "duplicates-dropped": _c(
        "Pipelines: re-keyed records seen before (a re-sent key_by record) and stream-stream join "
        "results of a left record already joined (once=True), dropped.",
        "duplicates-dropped",
    ),
    "registry-too-old": _c(
        "Join registry (stream-stream join): events older than its retention horizon, refused "
        "(whether they were joined can no longer be known).",
        "registry-too-old",
    ),
    # async tasks
    "retries": _c("Retries of a failed process_async().", "retries"),
    "timeouts": _c("process_async() calls over task.callback.timeout.ms.", "timeouts"),
    "max-queue-length": _g("Most messages an async task held at once.", "max-queue-length"),
    "in-flight": _g("Messages an async task holds (queued or running).", "in-flight"),
    "running": _g("process_async() calls running now.", "running"),
    "queue-length": _g("Messages an async task holds, not yet running.", "queue-length"),
    "delayed": _g("Messages held until timestamp + task.process.delay.ms.", "delayed"),
    "queue-capacity": _g("Messages an async task may hold (task.async.queue.size).", "queue-capacity"),
    # container
    "commit-calls": _c("Commits (flush, checkpoint).", "commit-calls"),
    "commit-ns": _c("Time spent committing.", "commit", "seconds", _NS),
    "lease-holds": _c("Group mode: rebalances that found a task's lease still held.", "lease-holds"),
    "group-generation": _g("Group mode: the consumer group's generation.", "group-generation"),
    "rebalances": _c("Group mode: rebalances this member took part in.", "rebalances"),
    "rebalance-in-progress": _g("Group mode: 1 while a rebalance is under way.", "rebalance-in-progress"),
    "last-rebalance-s": _g("Group mode: how long the last rebalance took.", "last-rebalance", "seconds"),
    "tasks-restoring": _g("Group mode: tasks restoring their stores in the background.", "tasks-restoring"),
    "tasks-assigned": _c("Group mode: tasks assigned to this member.", "tasks-assigned"),
    "tasks-revoked": _c("Group mode: tasks revoked from this member.", "tasks-revoked"),
    "tasks-lost": _c("Group mode: tasks lost (the member left the group).", "tasks-lost"),
    # inputs
    "offset": _g("The next offset the task processes.", "offset"),
    "high-watermark": _g("The partition's end offset.", "high-watermark"),
    "lag": _g("Messages between the task's offset and the partition's end.", "lag"),
    # stores
    "gets": _c("Store reads.", "gets"),
    "get-ns": _c("Time spent in store reads.", "get", "seconds", _NS),
    "puts": _c("Store writes.", "puts"),
    "put-ns": _c("Time spent in store writes.", "put", "seconds", _NS),
    "deletes": _c("Store deletes.", "deletes"),
    "delete-ns": _c("Time spent in store deletes.", "delete", "seconds", _NS),
    "ranges": _c("Store range scans.", "ranges"),
    "range-ns": _c("Time spent opening range scans.", "range", "seconds", _NS),
    "alls": _c("Full store scans.", "alls"),
    "all-ns": _c("Time spent opening full scans.", "all", "seconds", _NS),
    "flushes": _c("Store flushes.", "flushes"),
    "flush-ns": _c("Time spent flushing.", "flush", "seconds", _NS),
    "local-checkpoints": _c("Local RocksDB checkpoints taken.", "local-checkpoints"),
    "cache-hits": _c("Reads answered by the object cache.", "cache-hits"),
    "cache-misses": _c("Reads the object cache passed to the engine.", "cache-misses"),
    # not "dirty-count": Prometheus reserves the _count suffix for histograms and summaries
    "dirty-count": _g("Entries of the object cache not yet written to the engine.", "dirty-entries"),
    "cache-size": _g("Entries in the object cache.", "cache-size"),
    "bytes-written": _c("Serialised bytes written (keys and values).", "written", "bytes"),
    "bytes-read": _c("Serialised bytes read (keys and values).", "read", "bytes"),
    "disk-bytes": _g("Size of the store's live files on disk.", "disk", "bytes"),
    "restored-messages": _c("Changelog records replayed by restores.", "restored-messages"),
    "restored-bytes": _c("Changelog bytes replayed by restores.", "restored", "bytes"),
    "trimmed-messages": _c("Changelog records past the checkpoint undone by restores.", "trimmed-messages"),
    "restore-time": _g("How long the last restore took.", "restore", "seconds", 1e-3),
    "restore-target-records": _g("Records the current (or last) restore replays.", "restore-target-records"),
    "restore-replayed-records": _g(
        "Records the current (or last) restore replayed so far.", "restore-replayed-records"
    ),
    # snapshots in a blob store (stores/snapshot_upload.py)
    "snapshots-uploaded": _c("Store snapshots uploaded to the blob store.", "snapshots-uploaded"),
    "snapshot-files-uploaded": _c("Files sent by snapshot uploads.", "snapshot-files-uploaded"),
    "snapshot-files-reused": _c(
        "Files of snapshots referenced from earlier ones instead of being sent.", "snapshot-files-reused"
    ),
    "snapshot-bytes-uploaded": _c("Bytes sent by snapshot uploads.", "snapshot-uploaded", "bytes"),
    "snapshot-upload-failures": _c(
        "Snapshot uploads that failed (tried again) or were given up.", "snapshot-upload-failures"
    ),
    "snapshots-superseded": _c(
        "Queued snapshots replaced by a newer one before their upload.", "snapshots-superseded"
    ),
    "snapshot-upload-ns": _c("Time spent uploading snapshots.", "snapshot-upload", "seconds", _NS),
    "snapshot-lag-records": _g(
        "Changelog records committed since the store's newest complete snapshot.", "snapshot-lag-records"
    ),
    # standby replicas
    "standby-lag": _g("Changelog records the standby copy is behind.", "lag"),
    "standby-applied-offset": _g("The changelog offset the standby copy applied.", "applied-offset"),
    "standby-committed-offset": _g("The active task's checkpointed changelog offset.", "committed-offset"),
    "standby-checkpoint-offset": _g(
        "The offset of the standby's last local checkpoint.", "checkpoint-offset"
    ),
    "standby-applied-messages": _c("Changelog records the standby applied.", "applied-messages"),
    "standby-checkpoints": _c("Local checkpoints the standby took.", "checkpoints"),
    # side inputs
    "restored-records": _c("Side-input records read while catching up at start.", "restored-records"),
    "updates": _c("Side-input records read while running.", "updates"),
    "records-applied": _c("Side-input records applied to the store.", "records-applied"),
    "skipped-records": _c("Side-input records the processor skipped.", "skipped-records"),
}

#: The latency histograms, by registry name (observed in seconds).
HISTOGRAMS: dict[str, MetricDoc] = {
    "process-latency": MetricDoc(
        "Time per message in process() (a batch's mean, once per message).",
        HISTOGRAM,
        "process-latency",
        "seconds",
    ),
    "commit-latency": MetricDoc("Time per commit.", HISTOGRAM, "commit-latency", "seconds"),
    "restore-latency": MetricDoc("Time per store restore.", HISTOGRAM, "restore-latency", "seconds"),
}


def doc_for(name: str, counter: bool) -> MetricDoc:
    """The catalogue entry of ``name``, or a generic one for a metric a task defined."""
    found = CATALOG.get(name)
    if found is not None:
        return found
    kind = COUNTER if counter else GAUGE
    return MetricDoc(f"'{name}', a metric the job's code defines (not documented by samzapy).", kind, name)

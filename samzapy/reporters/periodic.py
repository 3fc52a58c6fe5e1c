"""Reporters that report every ``interval.seconds`` from a thread of their own.

A JSON snapshot to a Kafka stream (Samza's ``MetricsSnapshotReporter``) and a log line.

Each report reads :meth:`samzapy.metrics.MetricsRegistry.snapshot`; nothing is done per
metric update. A report that fails (broker away) is logged and skipped: metrics never stop
the job. One more report is sent at :meth:`PeriodicReporter.stop`, so that a short job
reports its final values too.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from samzapy.config.model import ReporterSpec
from samzapy.metrics import MetricsRegistry

if TYPE_CHECKING:
    from samzapy.kafka.producer import Producer

log = logging.getLogger(__name__)

_SNAPSHOT_ATTEMPTS = 5


def samzapy_version() -> str:
    """The installed samzapy version (``unknown`` when not installed as a package)."""
    try:
        return version("samzapy")
    except PackageNotFoundError:
        return "unknown"


def registry_snapshot(registry: MetricsRegistry) -> dict[str, dict[str, Any]]:
    """``registry.snapshot()`` read from another thread than the one updating it.

    Values are read without locks (the run loop never waits for a reporter). A group that
    gains a new metric while it is being read makes the read raise ``RuntimeError``
    ("dictionary changed size"); metrics are created at start-up almost always, so reading
    again is enough.
    """
    for attempt in range(_SNAPSHOT_ATTEMPTS):
        try:
            return registry.snapshot()
        except RuntimeError:
            if attempt == _SNAPSHOT_ATTEMPTS - 1:
                raise
    msg = "unreachable"
    raise AssertionError(msg)


@dataclass(frozen=True)
class ReportSource:
    """Who reports: the header fields shared by every snapshot of a container.

    ``reset_time_ms``: when the container started, Samza's ``reset-time``.
    """

    job_name: str
    job_id: str
    container_name: str
    host: str = socket.gethostname()
    reset_time_ms: int = 0

    @property
    def source(self) -> str:
        """Samza's ``source`` header: which job and container the snapshot comes from."""
        return f"{self.job_name}-{self.job_id}-{self.container_name}"


def snapshot_message(source: ReportSource, metrics: dict[str, dict[str, Any]], now_ms: int) -> dict[str, Any]:
    """One snapshot in Samza's ``MetricsSnapshot`` shape: a header and metrics by group.

    >>> src = ReportSource("job", "1", "samzapy-container-0", host="h", reset_time_ms=5)
    >>> message = snapshot_message(src, {"container": {"commit-calls": 2}}, now_ms=7)
    >>> message["metrics"], message["header"]["source"], message["header"]["time"]
    ({'container': {'commit-calls': 2}}, 'job-1-samzapy-container-0', 7)
    """
    return {
        "header": {
            "job-name": source.job_name,
            "job-id": source.job_id,
            "container-name": source.container_name,
            "source": source.source,
            "host": source.host,
            "time": now_ms,
            "reset-time": source.reset_time_ms,
            "version": "0.0.1",
            "samzapy-version": samzapy_version(),
        },
        "metrics": metrics,
    }


class PeriodicReporter:
    """Calls :meth:`report` every ``interval_s`` seconds on a daemon thread, and once more at stop.

    Subclasses implement :meth:`report`; it runs on the reporter's thread (and, for the last
    report, on the thread calling :meth:`stop`, after the reporter's thread has ended).
    """

    def __init__(self, spec: ReporterSpec, registry: MetricsRegistry, source: ReportSource) -> None:
        self.spec = spec
        self.registry = registry
        self.source = source
        self.reports = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the reporting thread."""
        self._thread = threading.Thread(
            target=self._run, name=f"metrics-reporter-{self.spec.name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.spec.interval_s):
            self._report_safely()

    def _report_safely(self) -> None:
        try:
            self.report(registry_snapshot(self.registry))
            self.reports += 1
        except Exception:
            log.warning("metrics reporter '%s' could not report", self.spec.name, exc_info=True)

    def report(self, metrics: dict[str, dict[str, Any]]) -> None:
        """Send one report of ``metrics``."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the thread, then send a last report."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._report_safely()
        self.close()

    def close(self) -> None:
        """Release what the reporter holds (after the last report)."""


class LogReporter(PeriodicReporter):
    """One INFO line per report: every group's metrics as compact JSON."""

    def report(self, metrics: dict[str, dict[str, Any]]) -> None:
        """Log ``metrics``."""
        log.info("metrics %s", json.dumps(metrics, sort_keys=True, separators=(",", ":"), default=str))


class SnapshotReporter(PeriodicReporter):
    """Sends a JSON :func:`snapshot_message` to ``spec.stream`` per report.

    Samza's ``MetricsSnapshotReporter``; keyed by :attr:`ReportSource.source`.

    The stream is created (one partition) when missing. It has its own producer: the
    container's belongs to the run loop's thread.
    """

    def __init__(
        self,
        spec: ReporterSpec,
        registry: MetricsRegistry,
        source: ReportSource,
        bootstrap_servers: str,
        replication_factor: int = 1,
    ) -> None:
        super().__init__(spec, registry, source)
        self._servers = bootstrap_servers
        self._replication_factor = replication_factor
        self._producer: Producer | None = None

    def start(self) -> None:
        """Create the stream if needed, connect, start reporting."""
        from samzapy.kafka.admin import TopicAdmin

        assert self.spec.stream is not None
        with TopicAdmin(self._servers) as admin:
            admin.ensure_topic(self.spec.stream.stream, 1, replication_factor=self._replication_factor)
        self._connect()
        super().start()

    def _connect(self) -> None:
        from samzapy.kafka.producer import Producer

        self._producer = Producer(self._servers, {"client_id": f"samzapy-metrics-{self.spec.name}"})

    def report(self, metrics: dict[str, dict[str, Any]]) -> None:
        """Send one snapshot and wait for its acknowledgement.

        After a failed send the producer is replaced (samzapy's producer keeps failing once
        a send failed, which suits commits, not metrics), so the next report tries afresh.
        """
        if self._producer is None:
            self._connect()
        message = snapshot_message(self.source, metrics, int(time.time() * 1000))
        value = json.dumps(message, default=str).encode()
        try:
            assert self._producer is not None and self.spec.stream is not None  # connected, started
            self._producer.send(self.spec.stream.stream, self.source.source.encode(), value)
            self._producer.flush(timeout_s=max(10.0, self.spec.interval_s))
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        """Close the producer."""
        if self._producer is not None:
            self._producer.close(timeout_s=5)
            self._producer = None

"""Metrics reporters, configured as in Samza.

With ``metrics.reporters=NAME,...`` and ``metrics.reporter.NAME.class=...``:

* ``snapshot`` (``org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory``): a JSON
  snapshot in Samza's ``MetricsSnapshot`` shape to ``metrics.reporter.NAME.stream`` every
  ``interval.seconds``;
* ``prometheus``: ``/metrics`` and ``/health`` on ``metrics.reporter.NAME.port``;
* ``log``: one log line of every metric every ``interval.seconds``.

Every reporter reads the container's :class:`~samzapy.metrics.MetricsRegistry` when it
reports; none adds work to the run loop. :class:`Reporters` starts and stops them all.
"""

from __future__ import annotations

import logging
import time

from samzapy.config import JobConfig, ReporterSpec
from samzapy.health import ContainerStatus
from samzapy.http_server import read_token
from samzapy.metrics import MetricsRegistry
from samzapy.reporters.container_metrics import register_container_gauges
from samzapy.reporters.periodic import (
    LogReporter,
    PeriodicReporter,
    ReportSource,
    SnapshotReporter,
    snapshot_message,
)
from samzapy.reporters.prometheus import MetricsHttpServer, RegistryCollector

log = logging.getLogger(__name__)

__all__ = [
    "LogReporter",
    "MetricsHttpServer",
    "RegistryCollector",
    "ReportSource",
    "ReporterSpec",
    "Reporters",
    "SnapshotReporter",
    "register_container_gauges",
    "snapshot_message",
]


def container_name(container_id: int) -> str:
    """Samza's container naming: ``samzapy-container-<id>``."""
    return f"samzapy-container-{container_id}"


class Reporters:
    """The reporters of one container.

    Built from the job's validated reporter specs (``JobConfig.reporters``: their problems
    were reported with the rest of the configuration); :meth:`start` binds the HTTP ports
    first, so that ``/health`` answers while the stores restore, then connects the snapshot
    reporters.
    """

    def __init__(
        self,
        specs: list[ReporterSpec],
        registry: MetricsRegistry,
        status: ContainerStatus,
        source: ReportSource,
        replication_factor: int = 1,
        token: str | None = None,
    ) -> None:
        self.specs = specs
        #: The bearer token of ``job.http.auth.token.file`` (``None``: none), for every HTTP port.
        self.token = token
        self.registry = registry
        self.status = status
        self.source = source
        self.replication_factor = replication_factor
        self.running: list[MetricsHttpServer | PeriodicReporter] = []

    @classmethod
    def from_job(
        cls,
        job: JobConfig,
        registry: MetricsRegistry,
        status: ContainerStatus,
        container_id: int = 0,
    ) -> Reporters:
        """The reporters the job's ``metrics.reporters`` lists, not started."""
        source = ReportSource(
            job.job_name, job.job_id, container_name(container_id), reset_time_ms=int(time.time() * 1000)
        )
        token = None if job.http_auth_token_file is None else read_token(job.http_auth_token_file)
        return cls(list(job.reporters), registry, status, source, job.replication_factor, token)

    def start(self, bootstrap_servers: str) -> None:
        """Start every reporter: HTTP servers first, then the periodic ones."""
        for spec in sorted(self.specs, key=lambda s: s.kind != "prometheus"):
            reporter: MetricsHttpServer | PeriodicReporter
            if spec.kind == "prometheus":
                reporter = MetricsHttpServer(spec, self.registry, self.status, self.source, self.token)
            elif spec.kind == "snapshot":
                reporter = SnapshotReporter(
                    spec, self.registry, self.source, bootstrap_servers, self.replication_factor
                )
            else:
                reporter = LogReporter(spec, self.registry, self.source)
            reporter.start()
            self.running.append(reporter)

    def http_port(self) -> int | None:
        """The port of the first Prometheus reporter, if one runs."""
        for reporter in self.running:
            if isinstance(reporter, MetricsHttpServer):
                return reporter.port
        return None

    def stop(self) -> None:
        """Stop every reporter (periodic ones send a last report); never raises."""
        for reporter in reversed(self.running):
            try:
                reporter.stop()
            except Exception:
                log.exception("stopping metrics reporter '%s' failed", reporter.spec.name)
        self.running = []

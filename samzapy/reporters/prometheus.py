"""The Prometheus reporter: ``/metrics`` (Prometheus text or OpenMetrics) and ``/health`` on
one HTTP port.

Metrics are not mirrored into ``prometheus_client`` objects as they change: a custom
collector reads :meth:`~samzapy.metrics.MetricsRegistry.snapshot` at scrape time, so an
update costs the run loop nothing more than it already does.

Names: ``samzapy_<kind>_<metric>`` with the group's parts as labels, the metric name
sanitised (``-`` -> ``_``), counters ending in ``_total``:

==============================  ============================================================
group                           samples
==============================  ============================================================
``container``                   ``samzapy_container_commit_calls_total``
``task.Partition 0``            ``samzapy_task_process_ns_total{task="Partition 0"}``
``store.counts.Partition 0``    ``samzapy_store_puts_total{store="counts",task="Partition 0"}``
``standby.counts.Partition 1``  ``samzapy_standby_standby_lag{store="counts",task="Partition 1"}``
``input.kafka.pageviews.0``     ``samzapy_input_lag{system="kafka",stream="pageviews",partition="0"}``
``other.rest``                  ``samzapy_other_<metric>{group="rest"}``
==============================  ============================================================
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from samzapy.config.model import ReporterSpec
from samzapy.health import ContainerStatus
from samzapy.http_server import BackgroundHttpServer, Route, send
from samzapy.metrics import MetricsRegistry
from samzapy.reporters.periodic import ReportSource, registry_snapshot
from samzapy.streams import SystemStreamPartition

log = logging.getLogger(__name__)

PREFIX = "samzapy"
_INVALID = re.compile(r"[^a-zA-Z0-9_]+")


def metric_name(kind: str, name: str) -> str:
    """The Prometheus name of metric ``name`` of a group of ``kind`` (before ``_total``).

    >>> metric_name("store", "restored-messages")
    'samzapy_store_restored_messages'
    """
    return _INVALID.sub("_", f"{PREFIX}_{kind}_{name}").lower()


def group_labels(group: str) -> tuple[str, dict[str, str]]:
    """The kind of a metrics group and the labels its name carries.

    >>> group_labels("store.counts.Partition 0")
    ('store', {'store': 'counts', 'task': 'Partition 0'})
    >>> group_labels("standby.counts.Partition 1")
    ('standby', {'store': 'counts', 'task': 'Partition 1'})
    >>> group_labels("input.kafka.page.views.3")
    ('input', {'system': 'kafka', 'stream': 'page.views', 'partition': '3'})
    >>> group_labels("container"), group_labels("async.Partition 1")
    (('container', {}), ('async', {'group': 'Partition 1'}))
    """
    kind, _, rest = group.partition(".")
    if not rest:
        return kind, {}
    if kind == "task":
        return kind, {"task": rest}
    if kind in ("store", "standby") and "." in rest:
        store, _, task = rest.partition(".")
        return kind, {"store": store, "task": task}
    if kind == "input":
        try:
            ssp = SystemStreamPartition.parse(rest)
        except ValueError:
            return kind, {"group": rest}
        return kind, {"system": ssp.system, "stream": ssp.stream, "partition": str(ssp.partition)}
    return kind, {"group": rest}


def counter_names(registry: MetricsRegistry) -> set[tuple[str, str]]:
    """``(group, metric)`` of every counter of ``registry``.

    The snapshot has values only; which of them are counters is read from the groups'
    counter tables (``samzapy.metrics`` keeps counters and gauges apart but has no public
    accessor for the kinds yet).
    """
    with registry._lock:
        groups = list(registry._groups.values())
    return {(g.name, name) for g in groups for name in list(g._counters)}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return value
    return None


class RegistryCollector(Collector):
    """A ``prometheus_client`` collector over a samzapy :class:`MetricsRegistry`.

    A metric that is a counter in every group it appears in is a Prometheus counter; if it
    is a gauge anywhere it is a gauge everywhere (one family has one type). Values that are
    not numbers (a gauge may hold text) are left out.
    """

    def __init__(self, registry: MetricsRegistry, source: ReportSource | None = None) -> None:
        self.registry = registry
        self.source = source

    def collect(self) -> Iterator[Metric]:
        """Every numeric metric of the registry, read now."""
        counters = counter_names(self.registry)
        samples: dict[str, list[tuple[bool, dict[str, str], float]]] = {}
        for group, values in registry_snapshot(self.registry).items():
            kind, labels = group_labels(group)
            for name, value in values.items():
                number = _number(value)
                if number is not None:
                    samples.setdefault(metric_name(kind, name), []).append(
                        ((group, name) in counters, labels, number)
                    )
        for name, found in sorted(samples.items()):
            yield self._family(name, found)
        if self.source is not None:
            info = InfoMetricFamily(f"{PREFIX}_container", "The job and container this process runs.")
            info.add_metric(
                [],
                {
                    "job_name": self.source.job_name,
                    "job_id": self.source.job_id,
                    "container_name": self.source.container_name,
                },
            )
            yield info

    @staticmethod
    def _family(name: str, found: list[tuple[bool, dict[str, str], float]]) -> Metric:
        label_names = sorted({k for _, labels, _ in found for k in labels})
        doc = f"samzapy metric {name.removeprefix(PREFIX + '_')}"
        if all(is_counter for is_counter, _, _ in found):
            family: Any = CounterMetricFamily(name, doc, labels=label_names)
        else:
            family = GaugeMetricFamily(name, doc, labels=label_names)
        for _, labels, value in found:
            family.add_metric([labels.get(k, "") for k in label_names], value)
        return family


class MetricsHttpServer:
    """Serves ``/metrics`` and ``/health`` (and a short index at ``/``) on a daemon thread.

    ``/health`` answers JSON ``{status, since, tasks, error, job, container}``, HTTP 200 when
    the container is running and 503 otherwise (restoring, failed, stopped), so that a
    load balancer or an orchestrator's readiness probe can use it as it is.
    """

    def __init__(
        self,
        spec: ReporterSpec,
        registry: MetricsRegistry,
        status: ContainerStatus,
        source: ReportSource,
    ) -> None:
        self.spec = spec
        self.registry = registry
        self.status = status
        self.source = source
        self.collectors = CollectorRegistry(auto_describe=False)
        self.collectors.register(RegistryCollector(registry, source))
        self._http: BackgroundHttpServer | None = None
        #: More paths served on this port: prefix -> route(path with query) -> (status, content
        #: type, body). The interactive queries (samzapy.query) add ``/stores`` when configured
        #: on the same port.
        self.routes: dict[str, Route] = {}

    @property
    def port(self) -> int:
        """The port listened on (the chosen one when configured as 0)."""
        assert self._http is not None
        return self._http.port

    def health(self) -> tuple[int, dict[str, Any]]:
        """The ``/health`` answer: HTTP status and JSON body."""
        body = self.status.snapshot()
        tasks = registry_snapshot(self.registry)
        body["tasks"] = {
            name: {
                "status": task_status,
                "processed": tasks.get(f"task.{name}", {}).get("messages-actually-processed", 0),
            }
            for name, task_status in body["tasks"].items()
        }
        body["job"] = {"name": self.source.job_name, "id": self.source.job_id}
        body["container"] = self.source.container_name
        return (200 if self.status.healthy else 503), body

    def start(self) -> None:
        """Bind the port and serve on a daemon thread.

        Raises:
            SamzapyError: the port cannot be bound (in use, or not allowed).
        """
        self._http = BackgroundHttpServer(
            self.spec.host,
            self.spec.port,
            _handler(self),
            what=f"metrics reporter '{self.spec.name}'",
            port_key=f"metrics.reporter.{self.spec.name}.port",
            thread_name=f"metrics-http-{self.spec.name}",
        )
        self._http.start()
        log.info(
            "metrics reporter '%s': Prometheus metrics at http://%s:%d/metrics, health at /health",
            self.spec.name,
            self.spec.host,
            self.port,
        )

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._http is not None:
            self._http.stop()
            self._http = None


def _handler(server: MetricsHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            if path == "/metrics":
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                send(self, 200, content_type, encoder(server.collectors))
            elif path == "/health":
                code, body = server.health()
                send(self, code, "application/json", json.dumps(body, default=str).encode())
            elif path == "/":
                send(self, 200, "text/plain; charset=utf-8", b"samzapy: /metrics (Prometheus), /health\n")
            elif route := next((r for p, r in server.routes.items() if path.startswith(p)), None):
                send(self, *route(self.path))
            else:
                send(self, 404, "text/plain; charset=utf-8", b"not found: try /metrics or /health\n")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
            log.debug("metrics http: " + format, *args)

    return Handler

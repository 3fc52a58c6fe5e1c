"""The Prometheus reporter: ``/metrics`` (Prometheus text or OpenMetrics) and ``/health`` on one HTTP port.

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
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from samzapy.config.model import ReporterSpec
from samzapy.health import ContainerStatus
from samzapy.http_server import BackgroundHttpServer
from samzapy.metrics import MetricsRegistry
from samzapy.reporters.catalog import CATALOG, COUNTER, HISTOGRAMS, MetricDoc, doc_for
from samzapy.reporters.periodic import ReportSource, registry_snapshot
from samzapy.streams import SystemStreamPartition

log = logging.getLogger(__name__)

PREFIX = "samzapy"
_INVALID = re.compile(r"[^a-zA-Z0-9_]+")
#: Endings Prometheus keeps for the series of histograms and summaries: a gauge named so gets
#: ``_value`` appended (``promtool check metrics`` rejects the page otherwise).
RESERVED_SUFFIXES = ("_count", "_sum", "_bucket")


def metric_name(kind: str, name: str) -> str:
    """The Prometheus family name of registry metric ``name`` of a group of ``kind``.

    In base units and without ``_total`` (:mod:`samzapy.reporters.catalog`).

    >>> metric_name("store", "restored-bytes"), metric_name("task", "process-ns")
    ('samzapy_store_restored_bytes', 'samzapy_task_process_seconds')
    >>> metric_name("task", "my-own.metric")
    'samzapy_task_my_own_metric'
    """
    doc = CATALOG.get(name) or HISTOGRAMS.get(name)
    stem = doc.exported(f"{PREFIX}_{kind}") if doc is not None else f"{PREFIX}_{kind}_{name}"
    return _INVALID.sub("_", stem).lower()


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


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return value
    return None


class RegistryCollector(Collector):
    """A ``prometheus_client`` collector over a samzapy :class:`MetricsRegistry`.

    Names, units, types and HELP come from :mod:`samzapy.reporters.catalog`: values are
    scaled into base units (seconds, bytes), counters end in ``_total``. A metric a task
    defines itself is a counter if it is one in every group it appears in. Values that are not
    numbers (a gauge may hold text) are left out. The latency histograms are Prometheus
    histograms.
    """

    def __init__(self, registry: MetricsRegistry, source: ReportSource | None = None) -> None:
        self.registry = registry
        self.source = source

    def collect(self) -> Iterator[Metric]:
        """Every numeric metric of the registry, read now."""
        counters = self.registry.counter_names()  # the snapshot has values, not kinds
        samples: dict[str, list[tuple[MetricDoc, dict[str, str], float]]] = {}
        for group, values in registry_snapshot(self.registry).items():
            kind, labels = group_labels(group)
            for name, value in values.items():
                number = _number(value)
                if number is not None:
                    doc = doc_for(name, (group, name) in counters)
                    samples.setdefault(metric_name(kind, name), []).append((doc, labels, number * doc.scale))
        for name, found in sorted(samples.items()):
            yield self._family(name, found)
        yield from self._histograms()
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
    def _family(name: str, found: list[tuple[MetricDoc, dict[str, str], float]]) -> Metric:
        label_names = sorted({k for _, labels, _ in found for k in labels})
        doc = found[0][0]
        if all(d.kind == COUNTER for d, _, _ in found):
            family: CounterMetricFamily | GaugeMetricFamily = CounterMetricFamily(
                name, doc.help, labels=label_names, unit=""
            )
        else:  # a counter's name ends in _total; a gauge's may end in what histograms keep
            gauge_name = f"{name}_value" if name.endswith(RESERVED_SUFFIXES) else name
            family = GaugeMetricFamily(gauge_name, doc.help, labels=label_names)
        for _, labels, value in found:
            family.add_metric([labels.get(k, "") for k in label_names], value)
        return family

    def _histograms(self) -> Iterator[Metric]:
        families: dict[str, tuple[HistogramMetricFamily, list[str]]] = {}
        for group in self.registry.groups():
            kind, labels = group_labels(group.name)
            for name, histogram in group.histograms().items():
                family_name = metric_name(kind, name)
                if family_name not in families:
                    doc = HISTOGRAMS.get(name)
                    text = doc.help if doc is not None else f"'{name}' durations."
                    families[family_name] = (
                        HistogramMetricFamily(family_name, text, labels=sorted(labels)),
                        sorted(labels),
                    )
                family, label_names = families[family_name]
                buckets = [(_le(bound), float(n)) for bound, n in histogram.cumulative()]
                family.add_metric([labels.get(k, "") for k in label_names], buckets, histogram.sum)
        for family, _ in families.values():
            yield family


def _le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


class MetricsHttpServer:
    """Serves ``/metrics`` and ``/health`` on a daemon thread.

    The status page and the interactive queries add their routes to :attr:`http` when they share
    its port.

    ``/health`` answers JSON ``{status, since, tasks, error, job, container}``, HTTP 200 when
    the container is running and 503 otherwise (restoring, failed, stopped), so that a
    load balancer or an orchestrator's readiness probe can use it as it is. Neither path is
    guarded by ``job.http.auth.token.file``: probes and Prometheus scrape them.
    """

    def __init__(
        self,
        spec: ReporterSpec,
        registry: MetricsRegistry,
        status: ContainerStatus,
        source: ReportSource,
        token: str | None = None,
    ) -> None:
        self.spec = spec
        self.registry = registry
        self.status = status
        self.source = source
        self.collectors = CollectorRegistry(auto_describe=False)
        self.collectors.register(RegistryCollector(registry, source))
        ProcessCollector(registry=self.collectors)
        PlatformCollector(registry=self.collectors)
        GCCollector(registry=self.collectors)
        self.http = BackgroundHttpServer(
            spec.host,
            spec.port,
            what=f"metrics reporter '{spec.name}'",
            port_key=f"metrics.reporter.{spec.name}.port",
            thread_name=f"metrics-http-{spec.name}",
            token=token,
        )
        self.http.add_route("/metrics", self._metrics)
        self.http.add_route("/health", self._health)

    @property
    def port(self) -> int:
        """The port listened on (the chosen one when configured as 0)."""
        return self.http.port

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

    def _health(self, _target: str, _headers: Mapping[str, str]) -> tuple[int, str, bytes]:
        code, body = self.health()
        return code, "application/json", json.dumps(body, default=str).encode()

    def _metrics(self, _target: str, headers: Mapping[str, str]) -> tuple[int, str, bytes]:
        encoder, content_type = choose_encoder(headers.get("Accept", ""))
        return 200, content_type, encoder(self.collectors)

    def start(self) -> None:
        """Bind the port and serve on a daemon thread.

        Raises:
            SamzapyError: the port cannot be bound (in use, or not allowed).
        """
        self.http.start()
        log.info(
            "metrics reporter '%s': Prometheus metrics at http://%s:%d/metrics, health at /health",
            self.spec.name,
            self.spec.host,
            self.port,
        )

    def stop(self) -> None:
        """Stop serving and close the port."""
        self.http.stop()

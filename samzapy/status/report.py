"""What the status page shows, as JSON (``/status.json``).

The job, this container, every task with its state, the inputs' lag over the last minutes,
rates, commit time, store sizes, dropped and dead-lettered counts, recent changes, the other
containers of the job, and the restore left in this container and in the job
(:mod:`samzapy.status.restore_eta`).

A :class:`StatusSampler` thread reads the container's metrics every :data:`SAMPLE_EVERY_S`
seconds and keeps :data:`SAMPLES_KEPT` samples: rates, restore progress and the lag charts
come from differences between samples, so a page load costs one snapshot and never touches
the run loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samzapy.health import ContainerStatus
from samzapy.metrics import MetricsRegistry
from samzapy.reporters.periodic import registry_snapshot
from samzapy.status.restore_eta import container_restore, job_restore, task_restore
from samzapy.streams import SystemStreamPartition, task_name_for

if TYPE_CHECKING:
    from samzapy.config import JobConfig

#: Seconds between two samples of the container's metrics.
SAMPLE_EVERY_S = 2.0
#: Samples kept: five minutes of charts.
SAMPLES_KEPT = 150
#: The task counters the page sums as "dropped" (let go without output).
DROPPED = (
    "skipped-messages",
    "producer-errors-dropped",
    "late-messages",
    "late-window-drops",
    "late-join-records",
)


@dataclass
class Sample:
    """One reading of the metrics: when, and the snapshot."""

    at: float
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)


class StatusSampler:
    """Samples ``registry`` every ``every_s`` seconds on a daemon thread (see the module doc)."""

    def __init__(
        self, registry: MetricsRegistry, every_s: float = SAMPLE_EVERY_S, kept: int = SAMPLES_KEPT
    ) -> None:
        self.registry = registry
        self.every_s = every_s
        self._samples: deque[Sample] = deque(maxlen=kept)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take a first sample and keep sampling until :meth:`stop`."""
        self.sample()
        self._thread = threading.Thread(target=self._run, name="status-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def sample(self) -> Sample:
        """Read the metrics now and keep the reading."""
        taken = Sample(time.time(), registry_snapshot(self.registry))
        with self._lock:
            self._samples.append(taken)
        return taken

    def now(self) -> Sample:
        """A reading of the metrics now, not kept (a page load must not shorten the charts)."""
        return Sample(time.time(), registry_snapshot(self.registry))

    def samples(self) -> list[Sample]:
        """The samples kept, oldest first."""
        with self._lock:
            return list(self._samples)


def _rate(samples: list[Sample], group: str, metric: str, window: int = 5) -> float:
    """Per-second change of ``group``'s ``metric`` over the last ``window`` samples."""
    recent = [s for s in samples[-window - 1 :] if metric in s.metrics.get(group, {})]
    if len(recent) < 2 or recent[-1].at <= recent[0].at:
        return 0.0
    change = recent[-1].metrics[group][metric] - recent[0].metrics[group][metric]
    rate: float = max(0.0, change / (recent[-1].at - recent[0].at))
    return rate


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


@dataclass
class StatusReport:
    """Builds the ``/status.json`` document of one container."""

    job: JobConfig
    container_name: str
    container_id: int
    instance_id: str | None
    status: ContainerStatus
    sampler: StatusSampler
    url: Callable[[], str | None] = lambda: None
    #: the other containers' status (each a dict with ``url``), ``None``: not known here
    peers: Callable[[], list[dict[str, Any]]] | None = None
    started: float = field(default_factory=time.time)

    def build(self, *, with_peers: bool = True) -> dict[str, Any]:
        """The document (see the module doc).

        ``with_peers=False`` leaves the others out (what a peer asks for, so that no request
        fans out twice).
        """
        now = self.sampler.now()
        samples = [*self.sampler.samples(), now]
        metrics = now.metrics
        health = self.status.snapshot()
        tasks = [
            self._task(name, state, metrics, samples)
            for name, state in sorted(health["tasks"].items(), key=_task_order)
        ]
        container = metrics.get("container", {})
        commits = _number(container.get("commit-calls"))
        document: dict[str, Any] = {
            "job": {"name": self.job.job_name, "id": self.job.job_id, "mode": self.job.coordinator},
            "container": {
                "name": self.container_name,
                "id": self.container_id,
                "instance_id": self.instance_id,
                "status": health["status"],
                "since": health["since"],
                "uptime_s": round(now.at - self.started, 1),
                "error": health["error"],
                "url": self.url(),
            },
            "membership": health.get("membership"),
            "broker": health.get("broker"),
            "standby": health.get("standby"),
            "now": round(now.at, 3),
            "totals": {
                "processed": sum(t["processed"] for t in tasks),
                "messages_per_s": round(sum(t["messages_per_s"] for t in tasks), 1),
                "lag": sum(t["lag"] for t in tasks),
                "dropped": sum(t["dropped"] for t in tasks),
                "dead_lettered": sum(t["dead_lettered"] for t in tasks),
                "disk_bytes": sum(t["disk_bytes"] for t in tasks),
                "commits": int(commits),
                "commit_mean_ms": round(_number(container.get("commit-ns")) / commits / 1e6, 1)
                if commits
                else None,
            },
            "tasks": tasks,
            "standbys": self._standbys(metrics),
            "inputs": self._inputs(samples),
            "rate_history": self._rate_history(samples),
            "events": [{"at": round(at, 3), "text": text} for at, text in self.status.events()],
            "restore": self._restore(health["tasks"], metrics, samples),
        }
        if with_peers:
            peers = self.peers() if self.peers is not None else None
            if peers is not None:
                document["peers"] = peers
            others = [p.get("restore") for p in peers or []]
            # the job's, when the others are known; else this container's alone
            document["job_restore"] = job_restore([document["restore"], *others])
        return document

    @staticmethod
    def _restore(
        states: dict[str, str], metrics: dict[str, Any], samples: list[Sample]
    ) -> dict[str, Any] | None:
        """This container's remaining restore, every restoring task counted (module doc)."""
        stores = {group: found for group, found in metrics.items() if group.startswith("store.")}
        progress = {
            name: task_restore(found for group, found in stores.items() if group.endswith(f".{name}"))
            for name in states
        }
        rate = sum(_rate(samples, group, "restore-replayed-records") for group in stores)
        restoring = [name for name, state in sorted(states.items(), key=_task_order) if state == "restoring"]
        return container_restore(restoring, progress, rate)

    def _task(self, name: str, state: str, metrics: dict[str, Any], samples: list[Sample]) -> dict[str, Any]:
        values = metrics.get(f"task.{name}", {})
        stores = [
            (group.split(".")[1], group, found)
            for group, found in metrics.items()
            if group.startswith("store.") and group.endswith(f".{name}")
        ]
        inputs = [found for group, found in metrics.items() if _input_task(group) == name]
        task: dict[str, Any] = {
            "name": name,
            "state": state,
            "processed": int(_number(values.get("messages-actually-processed"))),
            "messages_per_s": round(_rate(samples, f"task.{name}", "messages-actually-processed"), 1),
            "lag": int(sum(_number(i.get("lag")) for i in inputs)),
            "dropped": int(sum(_number(values.get(m)) for m in DROPPED)),
            "dead_lettered": int(
                _number(values.get("dead-lettered")) + _number(values.get("dead-letter-references"))
            ),
            "stores": [
                {"name": store, "disk_bytes": int(_number(found.get("disk-bytes"))), **_snapshot_lag(found)}
                for store, _, found in stores
            ],
            "restore": None,
        }
        task["disk_bytes"] = sum(s["disk_bytes"] for s in task["stores"])
        if state == "restoring":
            target = sum(_number(found.get("restore-target-records")) for _, _, found in stores)
            replayed = sum(_number(found.get("restore-replayed-records")) for _, _, found in stores)
            rate = sum(_rate(samples, group, "restore-replayed-records") for _, group, _ in stores)
            left = max(target - replayed, 0)
            task["restore"] = {
                "replayed": int(replayed),
                "target": int(target),
                "records_per_s": round(rate, 1),
                "eta_s": round(left / rate, 1) if rate > 0 else None,
            }
        return task

    @staticmethod
    def _standbys(metrics: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "store": group.split(".")[1],
                "task": group.split(".", 2)[2],
                "lag": int(_number(found.get("standby-lag"))),
            }
            for group, found in sorted(metrics.items())
            if group.startswith("standby.")
        ]

    @staticmethod
    def _inputs(samples: list[Sample]) -> list[dict[str, Any]]:
        last = samples[-1].metrics
        inputs = []
        for group, found in sorted(last.items()):
            if group.startswith("input."):
                inputs.append(
                    {
                        "partition": group.removeprefix("input."),
                        "task": _input_task(group),
                        "offset": found.get("offset"),
                        "high_watermark": found.get("high-watermark"),
                        "lag": found.get("lag"),
                        "lag_history": [
                            [round(s.at, 1), s.metrics[group].get("lag")]
                            for s in samples
                            if group in s.metrics
                        ],
                    }
                )
        return inputs

    @staticmethod
    def _rate_history(samples: list[Sample]) -> list[list[float]]:
        history = []
        for before, after in zip(samples, samples[1:], strict=False):
            elapsed = after.at - before.at
            if elapsed <= 0.5:  # a sample taken by a page load right after the sampler's
                continue
            processed = sum(
                _number(v.get("messages-actually-processed"))
                - _number(before.metrics.get(g, {}).get("messages-actually-processed"))
                for g, v in after.metrics.items()
                if g.startswith("task.") and g in before.metrics
            )
            history.append([round(after.at, 1), round(max(processed, 0) / elapsed, 1)])
        return history


def _input_task(group: str) -> str | None:
    """The task an ``input.<ssp>`` group's partition feeds (``None``: not an input group)."""
    if not group.startswith("input."):
        return None
    try:
        return task_name_for(SystemStreamPartition.parse(group.removeprefix("input.")).partition)
    except ValueError:
        return None


def _task_order(item: tuple[str, str]) -> tuple[int, str]:
    name = item[0]
    digits = name.rsplit(" ", 1)[-1]
    return (int(digits), name) if digits.isdigit() else (1 << 30, name)


def _snapshot_lag(found: dict[str, Any]) -> dict[str, int]:
    """``snapshot_lag_records`` of a store backed up to a blob store.

    The changelog records committed since its newest complete snapshot (absent for a store
    without snapshots).
    """
    if "snapshot-lag-records" not in found:
        return {}
    return {"snapshot_lag_records": int(_number(found.get("snapshot-lag-records")))}

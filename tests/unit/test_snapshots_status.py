"""The status document shows how far a store's snapshots are behind (issue 30): a store backed
up to a blob store has ``snapshot_lag_records``, one without snapshots has no such key."""

from __future__ import annotations

from samzapy.config import Config, parse_job_config
from samzapy.health import ContainerStatus
from samzapy.metrics import MetricsRegistry
from samzapy.status.report import Sample, StatusReport, StatusSampler

JOB = parse_job_config(
    Config.from_dict({"job.name": "j", "task.class": "mod:Task", "task.inputs": "kafka.in"})
)


class FixedSampler(StatusSampler):
    def __init__(self, registry: MetricsRegistry, sample: Sample) -> None:
        super().__init__(registry)
        self._sample = sample

    def now(self) -> Sample:
        return self._sample

    def samples(self) -> list[Sample]:
        return []


def test_a_backed_up_store_shows_its_snapshot_lag_and_another_store_does_not() -> None:
    registry = MetricsRegistry()
    status = ContainerStatus()
    status.restoring(["Partition 0"])
    registry.group("store.counts.Partition 0").gauge("snapshot-lag-records").set(1234)
    registry.group("store.seen.Partition 0").gauge("disk-bytes").set(10)
    report = StatusReport(
        JOB, "c-0", 0, None, status, FixedSampler(registry, Sample(1.0, registry.snapshot()))
    )
    stores = {s["name"]: s for s in report.build()["tasks"][0]["stores"]}
    assert stores["counts"]["snapshot_lag_records"] == 1234
    assert "snapshot_lag_records" not in stores["seen"]

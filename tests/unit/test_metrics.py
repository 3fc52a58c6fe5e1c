"""MetricsGroup snapshots while other threads add metrics."""

from __future__ import annotations

from samzapy.metrics import MetricsGroup


def test_a_snapshot_survives_metrics_added_while_it_reads() -> None:
    # Another thread may add a metric to a group while the container writes its snapshot (a
    # task restoring in the background); a gauge that adds one when read does it deterministically.
    group = MetricsGroup("task.Partition 0")
    group.counter("restored").inc()
    group.gauge("adds-more", lambda: group.gauge("late", lambda: 7) and 1)
    assert group.snapshot() == {"restored": 1, "adds-more": 1}
    assert group.snapshot() == {"restored": 1, "adds-more": 1, "late": 7}

"""Testing a task without a broker.

:class:`TaskHarness` runs one task of a job in-process over the real runtime (its
``TaskInstance``, error policy, commit and checkpoint) and in-memory clients
(:class:`MemoryBroker`, :class:`MemoryProducer`): feed messages, read outputs, stores and
changelogs, commit, crash and restart, move time on. docs/testing.md is the guide.

:class:`InMemoryChangelog` is a restorable changelog that stands alone (under
``build_store`` in a unit test); the harness's changelogs are :class:`BrokerChangelog`
objects in its broker.

Examples:
    >>> from samzapy.testing import TaskHarness
    >>> from samzapy.jobs.pageview_filter import PageViewFilterTask
    >>> serdes = {"systems.kafka.samza.key.serde": "string", "systems.kafka.samza.msg.serde": "json"}
    >>> h = TaskHarness(PageViewFilterTask, {"task.inputs": "kafka.pageviews", **serdes})
    >>> h.send("kafka.pageviews", "/page/1", {"view_id": "v1", "user_id": "u1", "page": "/page/1", "ts": 0})
    >>> [(o.key, o.message["hour"]) for o in h.outputs]
    [('u1', 0)]
"""

from __future__ import annotations

from samzapy.stores.memory_changelog import InMemoryChangelog
from samzapy.testing.broker import BrokerRecord, MemoryBroker, MemoryProducer, PartitionLog, distinct_by_id
from samzapy.testing.changelog import BrokerChangelog
from samzapy.testing.collector import CRASH_POINTS, RecordingCollector
from samzapy.testing.harness import HarnessError, TaskHarness

#: The name earlier versions used for :class:`InMemoryChangelog`.
CollectingChangelog = InMemoryChangelog

__all__ = [
    "CRASH_POINTS",
    "BrokerChangelog",
    "BrokerRecord",
    "CollectingChangelog",
    "HarnessError",
    "InMemoryChangelog",
    "MemoryBroker",
    "MemoryProducer",
    "PartitionLog",
    "RecordingCollector",
    "TaskHarness",
    "distinct_by_id",
]

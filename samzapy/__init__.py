"""samzapy: a Python stream processor in the Apache Samza mould.

The public API: the task interfaces and envelopes (``samzapy.task``), stream names
(``samzapy.streams``) and the store API (``samzapy.stores.KeyValueStore``).
"""

from samzapy.streams import SystemStream, SystemStreamPartition
from samzapy.task import (
    AsyncStreamTask,
    ClosableTask,
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    TaskContext,
    TaskCoordinator,
    WindowableTask,
)

__all__ = [
    "AsyncStreamTask",
    "ClosableTask",
    "IncomingMessageEnvelope",
    "InitableTask",
    "MessageCollector",
    "OutgoingMessageEnvelope",
    "StreamTask",
    "SystemStream",
    "SystemStreamPartition",
    "TaskContext",
    "TaskCoordinator",
    "WindowableTask",
]

__version__ = "0.1.0"

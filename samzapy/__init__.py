"""samzapy: a Python stream processor in the Apache Samza mould.

The public API: pipelines (``samzapy.App`` and the stages, ``samzapy.pipeline``), the task
interfaces and envelopes (``samzapy.task``), stream names (``samzapy.streams``) and the store
API (``samzapy.stores.KeyValueStore``).
"""

from typing import TYPE_CHECKING

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
    # the pipeline API, imported on first use (__getattr__ below)
    "App",
    "GlobalTable",
    "PipelineError",
    "Stream",
    "Table",
    "aggregate",
    "count",
    "count_window",
    "days",
    "hopping",
    "hours",
    "integer",
    "json",
    "long",
    "max",
    "milliseconds",
    "min",
    "minutes",
    "raw",
    "reduce",
    "seconds",
    "session",
    "sliding",
    "store",
    "string",
    "sum",
    "tumbling",
]

__version__ = "0.1.0"

#: The pipeline API (``samzapy.App``, ``samzapy.tumbling``...), imported on first use so that
#: ``import samzapy`` stays cheap for tasks (docs/pipelines.md).
_PIPELINE_NAMES = frozenset(
    "App GlobalTable PipelineError Stream Table aggregate count count_window days hopping hours "
    "integer json long max milliseconds min minutes raw reduce seconds session sliding store "
    "string sum tumbling".split()
)


if TYPE_CHECKING:  # what __getattr__ returns, for type checkers and editors (else: object)
    from samzapy.pipeline import (
        App,
        GlobalTable,
        PipelineError,
        Stream,
        Table,
        aggregate,
        count,
        count_window,
        days,
        hopping,
        hours,
        integer,
        json,
        long,
        max,
        milliseconds,
        min,
        minutes,
        raw,
        reduce,
        seconds,
        session,
        sliding,
        store,
        string,
        sum,
        tumbling,
    )


def __dir__() -> list[str]:
    # dir(samzapy) and completion in a REPL show the pipeline names, imported on first use
    return sorted({*globals(), *_PIPELINE_NAMES})


def __getattr__(name: str) -> object:
    if name in _PIPELINE_NAMES:
        from samzapy import pipeline

        return getattr(pipeline, name)
    msg = f"module 'samzapy' has no attribute {name!r}"
    raise AttributeError(msg)

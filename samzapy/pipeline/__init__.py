"""Pipelines: jobs written as chained stages on streams and tables (issue 29).

>>> import samzapy
>>> app = samzapy.App("pageview-counts")
>>> views = app.stream("pageviews", value=samzapy.json)
>>> out = (views.filter(lambda v: v["page"] != "/health")
...        .key_by(lambda v: v["user"])
...        .window(samzapy.tumbling(hours=1), samzapy.count(), grace=samzapy.minutes(10))
...        .to("pageview-counts"))
>>> sorted(app.plan().stores)
['pageviews-repartition', 'pageviews-repartition-window']

A pipeline compiles onto the task model (:mod:`.compiler`): one job, one generic task class
(:mod:`.task`) whose stages delegate to :mod:`samzapy.operators`. docs/pipelines.md.
"""

from samzapy.pipeline.api import App, GlobalTable, PipelineError, Stream, Table, store
from samzapy.pipeline.specs import (
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
    string,
    sum,
    tumbling,
)

__all__ = [
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

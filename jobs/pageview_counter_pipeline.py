"""Page views per user per hour as a pipeline.

The two task jobs :mod:`samzapy.jobs.pageview_repartition` and
:mod:`samzapy.jobs.pageview_counter` (with ``config/pageview-repartition.properties`` and
``config/pageview-counter.properties``) in a dozen lines. Run it with
``samzapy run samzapy.jobs.pageview_counter_pipeline:app``.

It reads ``pageviews`` (JSON keyed by page, event time ``ts``), re-keys the views by user
through the intermediate topic ``pageview-counter-pipeline-pageviews-by-user``, counts them in
hourly event-time windows with ten minutes of allowed lateness (later views go to
``pageviews-late``), and writes one final record per (user, hour) to ``pageview-counts``:
the same records, ids and bytes as the task version (tests/unit/test_pipeline_jobs.py).
"""

from __future__ import annotations

import samzapy

app = samzapy.App("pageview-counter-pipeline")

views = app.stream("pageviews", timestamp="ts")
(
    views.key_by(lambda view: view["user_id"], name="pageviews-by-user")
    .window(
        samzapy.tumbling(hours=1),
        samzapy.count(),
        grace=samzapy.minutes(10),
        name="pageview-counts",
        late_to="pageviews-late",
    )
    .map(
        lambda w: {
            "user_id": w["key"],
            "window_start": w["start"],
            "window_end": w["end"],
            "count": w["value"],
        }
    )
    .to("pageview-counts")
)

"""Ad clicks joined to their impressions as a pipeline.

The windowed stream-stream join of :mod:`samzapy.jobs.ad_click_join`
(``config/ad-click-join.properties``, after Google's Photon). Run it with
``samzapy run samzapy.jobs.ad_click_join_pipeline:app``.

A click at ``tc`` joins the impression of its id at ``ti`` when
``tc - 120 s <= ti <= tc + 5 s``; either may come first; each click is decided at most once
ever (``once=True``: joined, or sent to ``unjoined-clicks`` once its window has closed), with
ten seconds of allowed lateness. The outputs, their ids and bytes, and the join's stores are
the task version's, in store layout 1 (tests/unit/test_pipeline_jobs.py) and in layout 2, the
default, also across kill -9 rounds (tests/unit/test_pipeline_stream_join_layout.py).
"""

from __future__ import annotations

import samzapy
from samzapy.jobs.ad_click_join import joined_record

app = samzapy.App("ad-click-join-pipeline")

clicks = app.stream("clicks", timestamp="ts")
impressions = app.stream("impressions", timestamp="ts")
decided = clicks.join(
    impressions,
    joined_record,
    within=(samzapy.seconds(120), samzapy.seconds(5)),
    kind="left",
    grace=samzapy.seconds(10),
    ids=(lambda click: click["click_id"], lambda impression: impression["impression_id"]),
    once=True,
    name="ad-click-join",
)
joined, unjoined = decided.branch(lambda record: "impression_ts" in record, lambda record: True)
joined.to("ad-clicks-joined")
unjoined.to("unjoined-clicks")

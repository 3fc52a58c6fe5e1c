"""Page views enriched with the user's zip code, as a pipeline.

The stream-table join of :mod:`samzapy.jobs.pageview_enrich`
(``config/pageview-enrich.properties``). Run it with
``samzapy run samzapy.jobs.pageview_enrich_pipeline:app``.

``profiles`` (JSON keyed by user_id) is read as a table; each view of ``pageviews-by-user``
(keyed by user_id) whose user has a profile goes to ``pageviews-enriched`` with the profile's
``zip`` added: the same records as the task version; their ids differ (the task version names
them ``enrich:<input>``, the pipeline derives them from the input offset,
tests/unit/test_pipeline_jobs.py). The task version reads ``profiles`` as a bootstrap stream
(to its end before any view); a pipeline's inputs interleave as they arrive.
"""

from __future__ import annotations

import samzapy

app = samzapy.App("pageview-enrich-pipeline")

profiles = app.table("profiles", name="zip-codes")
views = app.stream("pageviews-by-user")
views.join(profiles, lambda view, profile: {**view, "zip": profile["zip"]}, name="enrich").to(
    "pageviews-enriched"
)

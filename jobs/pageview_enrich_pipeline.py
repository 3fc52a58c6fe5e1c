"""Page views enriched with the user's zip code, as a pipeline.

The stream-table join of :mod:`samzapy.jobs.pageview_enrich`
(``config/pageview-enrich.properties``). Run it with
``samzapy run samzapy.jobs.pageview_enrich_pipeline:app``.

``profiles`` (JSON keyed by user_id) is read as a table that keeps each user's ``zip``
(``map_values``) in the store ``zip-codes``; each view of ``pageviews-by-user`` (keyed by
user_id) whose user has one goes to ``pageviews-enriched`` with the ``zip`` added. The join
stage is named ``enrich``, so its records are ``enrich:<input>``: the task version's records,
ids and store (tests/unit/test_pipeline_jobs.py). ``profiles`` is a bootstrap table, as in the
task version: read to its end before any view, at every start.
"""

from __future__ import annotations

import samzapy

app = samzapy.App("pageview-enrich-pipeline")

# a bootstrap table, as the task version's profiles: read to its end before any view
profiles = app.table("profiles", name="zip-codes", map_values=lambda profile: profile["zip"], bootstrap=True)
views = app.stream("pageviews-by-user")
views.join(profiles, lambda view, zip_code: {**view, "zip": zip_code}, name="enrich").to("pageviews-enriched")

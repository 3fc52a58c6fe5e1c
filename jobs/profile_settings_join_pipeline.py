"""User profiles joined with user settings by user_id, as a pipeline.

The table-table join of :mod:`samzapy.jobs.profile_settings_join`
(``config/profile-settings-join.properties``). Run it with
``samzapy run samzapy.jobs.profile_settings_join_pipeline:app``.

Both topics are read as tables (JSON keyed by user_id, a null value deletes); every change of
either side sends the user's whole joined record ``{"user_id", "profile", "settings"}`` (a
tombstone when there is none) to ``user-profile-settings`` and keeps it in the store
``tt-joined``. The stage is named ``tt``, so each change's id is
``tt:<stream>:<partition>:<offset>:<profile offset>:<settings offset>``: the task version's
changes, ids and store contents (its ``joined`` is ``tt-joined`` here;
tests/unit/test_pipeline_jobs.py, tests/integration/test_pipeline_crash.py).
"""

from __future__ import annotations

import samzapy

app = samzapy.App("profile-settings-join-pipeline")

profiles = app.table("profiles")
settings = app.table("settings")
profiles.join(
    settings,
    lambda user, profile, setting: {"user_id": user, "profile": profile, "settings": setting},
    with_key=True,
    name="tt",
).to("user-profile-settings")

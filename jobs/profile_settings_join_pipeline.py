"""User profiles joined with user settings by user_id, as a pipeline.

The table-table join of :mod:`samzapy.jobs.profile_settings_join`
(``config/profile-settings-join.properties``). Run it with
``samzapy run samzapy.jobs.profile_settings_join_pipeline:app``.

Both topics are read as tables (JSON keyed by user_id, a null value deletes); every change of
either side that changes a user's joined record sends ``{"user_id", "profile", "settings"}``
(or a tombstone when the user's joined record is gone) to ``user-profile-settings``. The last
record per user is the task version's joined table; the task version also sends a tombstone
for an update after which the user has no joined record and had none before, and its ids name
the versions joined (tests/unit/test_pipeline_jobs.py).
"""

from __future__ import annotations

import samzapy

app = samzapy.App("profile-settings-join-pipeline")

profiles = app.table("profiles")
settings = app.table("settings")
(
    profiles.join(settings, lambda profile, setting: [profile, setting], name="profile-settings")
    .to_stream()
    .map(
        lambda user, joined: (
            None if joined is None else {"user_id": user, "profile": joined[0], "settings": joined[1]}
        ),
        with_key=True,
    )
    .to("user-profile-settings")
)

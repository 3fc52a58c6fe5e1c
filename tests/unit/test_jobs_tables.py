"""The table-table and stream-table joins, in-process with the TaskHarness."""

from __future__ import annotations

from pathlib import Path

from samzapy.config import load_config
from samzapy.jobs.pageview_enrich import PageViewEnrichTask
from samzapy.jobs.profile_settings_join import ProfileSettingsJoinTask
from samzapy.operators.event_time import end_of_stream_record
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config"


def harness(task, file: str, *overrides: str) -> TaskHarness:
    return TaskHarness(task, load_config(CONFIG / file, overrides))


PROFILE = {"user_id": "u1", "name": "Ann", "zip": "10001", "updated_at": 1}
SETTINGS = {"user_id": "u1", "language": "fr", "notifications": True, "updated_at": 2}


# ----------------------------------------------------------------- table-table
def test_inner_join_emits_the_joined_record_once_both_sides_exist_and_tombstones_before():
    h = harness(ProfileSettingsJoinTask, "profile-settings-join.properties")
    h.send("kafka.profiles", "u1", PROFILE)
    h.send("kafka.settings", "u1", SETTINGS)

    first, second = h.outputs
    assert (first.key, first.message, first.id) == ("u1", None, "tt:profiles:0:0:0:-")
    assert second.message == {"user_id": "u1", "profile": PROFILE, "settings": SETTINGS}
    assert second.id == "tt:settings:0:0:0:0"
    assert h.stores["joined"].get("u1") == second.message


def test_an_update_of_either_side_emits_the_new_joined_record_with_its_versions():
    h = harness(ProfileSettingsJoinTask, "profile-settings-join.properties")
    h.send("kafka.profiles", "u1", PROFILE)
    h.send("kafka.settings", "u1", SETTINGS)
    h.send("kafka.profiles", "u1", {**PROFILE, "zip": "20002"})

    last = h.outputs[-1]
    assert last.message["profile"]["zip"] == "20002" and last.message["settings"] == SETTINGS
    assert last.id == "tt:profiles:0:1:1:0"


def test_a_deletion_retracts_the_joined_record_in_the_stream_and_the_table():
    h = harness(ProfileSettingsJoinTask, "profile-settings-join.properties")
    h.send("kafka.profiles", "u1", PROFILE)
    h.send("kafka.settings", "u1", SETTINGS)
    h.send("kafka.settings", "u1", None)

    assert h.outputs[-1].message is None and h.outputs[-1].id == "tt:settings:0:1:0:-"
    assert h.stores["joined"].get("u1") is None
    h.commit()
    assert b"u1" not in h.changelogs["joined"].latest()  # the table's changelog has the tombstone


def test_left_join_emits_the_profile_alone():
    h = harness(ProfileSettingsJoinTask, "profile-settings-join.properties", "join.kind=left")
    h.send("kafka.profiles", "u1", PROFILE)
    assert h.outputs[0].message == {"user_id": "u1", "profile": PROFILE, "settings": None}


# ----------------------------------------------------------------- stream-table
VIEW = {"view_id": "v1", "user_id": "u1", "page": "/page/1", "ts": 5}


def test_views_get_the_zip_of_the_latest_profile():
    h = harness(PageViewEnrichTask, "pageview-enrich.properties")
    h.send("kafka.profiles", "u1", PROFILE)
    h.send("kafka.profiles", "u1", {**PROFILE, "zip": "20002"})
    h.send("kafka.pageviews-by-user", "u1", VIEW, headers=[("samzapy.id", b"Partition 3:pageviews:17:0")])

    [out] = h.outputs
    assert (out.key, out.message) == ("u1", {**VIEW, "zip": "20002"})
    assert out.id == "enrich:Partition 3:pageviews:17:0"  # derived from the upstream id


def test_inner_join_drops_and_counts_views_of_users_without_a_profile():
    h = harness(PageViewEnrichTask, "pageview-enrich.properties")
    h.send("kafka.profiles", "u1", PROFILE)
    h.send("kafka.profiles", "u1", None)  # deleted
    h.send("kafka.pageviews-by-user", "u1", VIEW)
    assert h.outputs == [] and h.metrics.counter("unmatched-views").value == 1


def test_left_join_sends_views_without_a_profile_with_a_null_zip():
    h = harness(PageViewEnrichTask, "pageview-enrich.properties", "join.kind=left")
    h.send("kafka.pageviews-by-user", "u1", VIEW, offset=4)
    [out] = h.outputs
    assert out.message == {**VIEW, "zip": None}
    assert out.id == "enrich:Partition 0:pageviews-by-user:4"


def test_control_records_in_the_view_stream_are_ignored():
    h = harness(PageViewEnrichTask, "pageview-enrich.properties", "join.kind=left")
    headers, _ = end_of_stream_record("0")
    h.send("kafka.pageviews-by-user", None, {"control": "end-of-stream", "source": "0"}, headers=headers)
    assert h.outputs == []

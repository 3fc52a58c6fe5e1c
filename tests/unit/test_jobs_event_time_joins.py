"""join.time=event in the stream-table and table-table join jobs, in-process with the
TaskHarness."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import load_config
from samzapy.errors import ConfigError
from samzapy.jobs.pageview_enrich import PageViewEnrichTask
from samzapy.jobs.profile_settings_join import ProfileSettingsJoinTask
from samzapy.operators.event_time import end_of_stream_record
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config"
EOS_HEADERS = end_of_stream_record()[0]
PROFILES = [("u1", "A", 100), ("u2", "X", 150), ("u1", "B", 300), ("u1", "C", 500)]
VIEWS = [("u1", 50), ("u1", 120), ("u2", 200), ("u1", 310), ("u1", 299), ("u1", 600)]


def enrich() -> TaskHarness:
    config = load_config(CONFIG / "pageview-enrich-event-time.properties", ["join.grace.ms=0"])
    return TaskHarness(PageViewEnrichTask, config)


def send_profile(h: TaskHarness, i: int) -> None:
    user, zip_code, t = PROFILES[i]
    h.send("kafka.profiles", user, {"user_id": user, "name": "n", "zip": zip_code, "updated_at": t}, offset=i)


def send_view(h: TaskHarness, i: int) -> None:
    user, t = VIEWS[i]
    h.send("kafka.pageviews-by-user", user, {"view_id": f"v{i}", "user_id": user, "ts": t}, offset=i)


def end_profiles(h: TaskHarness) -> None:
    h.send("kafka.profiles", None, {"control": "end-of-stream"}, headers=EOS_HEADERS, offset=99)


def pairs(h: TaskHarness) -> dict[str, tuple[str, str]]:
    return {o.id: (o.message["view_id"], o.message["zip"]) for o in h.outputs}


def test_event_time_enrichment_gives_the_same_pairs_whatever_the_interleaving():
    profiles_first, views_first, mixed = enrich(), enrich(), enrich()
    for i in range(len(PROFILES)):
        send_profile(profiles_first, i)
    for i in range(len(VIEWS)):
        send_view(profiles_first, i)
        send_view(views_first, i)
    assert views_first.outputs == []  # no profile progress yet: every view waits
    for i in range(len(PROFILES)):
        send_profile(views_first, i)
    order = ["p0", "v0", "v1", "v2", "p1", "v3", "p2", "v4", "v5", "p3"]
    for step in order:
        (send_profile if step[0] == "p" else send_view)(mixed, int(step[1]))
    for h in (profiles_first, views_first, mixed):
        end_profiles(h)
    want = {
        "enrich:Partition 0:pageviews-by-user:1": ("v1", "A"),
        "enrich:Partition 0:pageviews-by-user:2": ("v2", "X"),
        "enrich:Partition 0:pageviews-by-user:3": ("v3", "B"),
        "enrich:Partition 0:pageviews-by-user:4": ("v4", "A"),
        "enrich:Partition 0:pageviews-by-user:5": ("v5", "C"),
    }  # v0 (at 50) precedes every profile of u1: dropped by the inner join
    assert pairs(profiles_first) == pairs(views_first) == pairs(mixed) == want
    assert [len(h.outputs) for h in (profiles_first, views_first, mixed)] == [5, 5, 5]


def test_table_table_join_time_event_ignores_an_older_update():
    config = load_config(CONFIG / "profile-settings-join.properties", ["join.time=event"])
    h = TaskHarness(ProfileSettingsJoinTask, config)
    h.send("kafka.settings", "u1", {"user_id": "u1", "language": "fr", "updated_at": 5})
    h.send("kafka.profiles", "u1", {"user_id": "u1", "zip": "2", "updated_at": 20}, offset=0)
    h.send("kafka.profiles", "u1", {"user_id": "u1", "zip": "1", "updated_at": 10}, offset=1)
    assert len(h.outputs) == 2  # the older profile changed nothing and sent nothing
    assert h.stores["joined"].get("u1")["profile"]["zip"] == "2"
    assert h.metrics.snapshot()["stale-updates"] == 1


def test_a_versioned_store_without_its_history_key_is_a_config_error_naming_it():
    props = dict(load_config(CONFIG / "pageview-enrich-event-time.properties"))
    del props["stores.zip-versions.versioned.history.ms"]
    with pytest.raises(ConfigError, match=r"versioned table.*zip-versions\.versioned\.history\.ms"):
        TaskHarness(PageViewEnrichTask, props)

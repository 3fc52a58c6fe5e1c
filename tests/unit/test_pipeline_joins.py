"""Pipeline joins in-process: stream-table (processing and event time), table-table,
stream-stream within a bound, and a global table."""

from __future__ import annotations

import samzapy
from samzapy.pipeline.testing import PipelineHarness


def test_a_stream_joined_with_a_table_gets_the_tables_current_value() -> None:
    app = samzapy.App("enrich")
    profiles = app.table("profiles")
    views = app.stream("views")
    views.join(profiles, lambda v, p: {**v, "zip": p["zip"]}).to("enriched")
    views.join(profiles, lambda v, p: {"zip": p and p["zip"]}, kind="left", name="left-join").to("zips")
    with PipelineHarness(app, partitions=2) as h:
        h.send("views", "ann", {"page": "/a"})
        h.send("profiles", "ann", {"zip": "111"})
        h.send("views", "ann", {"page": "/b"})
        h.send("profiles", "ann", {"zip": "222"})
        h.send("views", "ann", {"page": "/c"})
        assert h.outputs("enriched") == [
            ("ann", {"page": "/b", "zip": "111"}),
            ("ann", {"page": "/c", "zip": "222"}),
        ]
        assert [v["zip"] for _, v in h.outputs("zips")] == [None, "111", "222"]
        assert h.store("profiles") == {"ann": {"zip": "222"}}


def test_a_stream_joined_with_a_versioned_table_gets_the_version_at_its_event_time() -> None:
    app = samzapy.App("as-of")
    rates = app.table("rates", timestamp="ts", versioned=86_400_000)
    orders = app.stream("orders", timestamp="ts")
    orders.join(rates, lambda o, r: {"order": o["id"], "rate": r["rate"]}).to("priced")
    with PipelineHarness(app) as h:
        h.send("rates", "eur", {"rate": 1, "ts": 100})
        h.send("orders", "eur", {"id": "o1", "ts": 150})  # waits: the table has not passed 150
        h.send("rates", "eur", {"rate": 2, "ts": 200})  # releases o1 with the version at 150
        h.send("orders", "eur", {"id": "o2", "ts": 120})  # the table is past 120: joined at once
        assert h.outputs("priced") == [
            ("eur", {"order": "o1", "rate": 1}),
            ("eur", {"order": "o2", "rate": 1}),
        ]


def test_two_tables_joined_emit_the_joined_value_on_every_change_and_retract_on_delete() -> None:
    app = samzapy.App("tt")
    profiles = app.table("profiles")
    settings = app.table("settings")
    profiles.join(settings, lambda p, s: {**p, **s}).to("joined")
    with PipelineHarness(app) as h:
        h.send("profiles", "u", {"name": "ann"})
        h.send("settings", "u", {"theme": "dark"})
        h.send("profiles", "u", {"name": "anne"})
        h.send("settings", "u", None)
        assert h.outputs("joined") == [
            ("u", None),  # every change states the key's joined record: none yet
            ("u", {"name": "ann", "theme": "dark"}),
            ("u", {"name": "anne", "theme": "dark"}),
            ("u", None),
        ]


def test_two_streams_join_within_the_bound_and_left_ones_come_out_unmatched_once_closed() -> None:
    app = samzapy.App("ss")
    impressions = app.stream("impressions", timestamp="ts")
    clicks = app.stream("clicks", timestamp="ts")
    impressions.join(
        clicks, lambda i, c: {"imp": i["id"], "click": c and c["id"]}, within=(0, 1000), kind="left"
    ).to("joined")
    with PipelineHarness(app) as h:
        h.send("impressions", "ad1", {"id": "i1", "ts": 0})
        h.send("impressions", "ad2", {"id": "i2", "ts": 0})
        h.send("clicks", "ad1", {"id": "c1", "ts": 500})
        h.send("clicks", "ad1", {"id": "c2", "ts": 5000})  # too late for i1
        h.end_of_stream()
        out = sorted((k, v["imp"], v["click"]) for k, v in h.outputs("joined"))
    assert out == [("ad1", "i1", "c1"), ("ad2", "i2", None)]


def test_a_global_table_is_looked_up_by_any_key() -> None:
    app = samzapy.App("global")
    zips = app.global_table("zips")
    app.stream("views").join(zips, lambda v, z: {**v, "city": z["city"]}, on=lambda v: v["zip"]).to("out")
    plan = app.plan()
    assert plan.stores["zips"].side_input == "zips"
    assert "zips" not in plan.inputs
    with PipelineHarness(app, partitions=2) as h:
        h.send("zips", "10115", {"city": "Berlin"})
        h.send_all("views", [("ann", {"zip": "10115"}), ("bob", {"zip": "75001"}), ("cyd", {"zip": "10115"})])
        assert sorted(h.outputs("out")) == [
            ("ann", {"zip": "10115", "city": "Berlin"}),
            ("cyd", {"zip": "10115", "city": "Berlin"}),
        ]

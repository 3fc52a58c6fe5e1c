"""Pipeline bugs a new user met writing the docs' pipelines on a fresh clone (issue 29's
done-when): each test is the user's pipeline and the output the docs promise."""

from __future__ import annotations

import samzapy
from samzapy.pipeline.testing import PipelineHarness


def _enrich_versioned() -> samzapy.App:
    app = samzapy.App("enrich-versioned")
    profiles = app.table("profiles", versioned=samzapy.hours(1))
    views = app.stream("views")
    views.join(profiles, lambda v, p: {**v, "zip": p and p["zip"]}, kind="left").to("enriched")
    return app


def test_a_versioned_table_that_ended_releases_the_records_waiting_for_it():
    # Each view waits until the profiles table has passed its time; a table partition that
    # received no profile at all (cyd's here) passes no time, so only its end-of-stream can
    # release the view. It was ignored: cyd's view never came out, not even after the end.
    with PipelineHarness(_enrich_versioned(), partitions=2) as h:
        h.send("profiles", "ann", {"zip": "10115"})
        h.send("views", "cyd", {"page": "/c"})
        h.send("views", "ann", {"page": "/a"})
        h.end_of_stream()
        got = sorted((k, v["zip"]) for k, v in h.outputs("enriched"))
    assert got == [("ann", "10115"), ("cyd", None)]


def test_records_of_two_partitions_at_the_same_offset_get_different_ids():
    # A stream record's id is its place in the input (ids= not given); the place left out the
    # partition, so the first view of partition 0 and the first view of partition 1, joined
    # with their versioned profiles, came out with one id (the harness refused the outputs; a
    # consumer deduplicating by id would have dropped one). ann and cyd: two partitions.
    with PipelineHarness(_enrich_versioned(), partitions=2) as h:
        h.send("profiles", "ann", {"zip": "10115"}, timestamp=100)
        h.send("profiles", "cyd", {"zip": "80331"}, timestamp=100)
        h.send("views", "ann", {"page": "/a"}, timestamp=100)
        h.send("views", "cyd", {"page": "/c"}, timestamp=100)
        got = sorted((k, v["zip"]) for k, v in h.outputs("enriched"))
    assert got == [("ann", "10115"), ("cyd", "80331")]

"""What docs/pipelines.md's 'Not offered yet' says of table joins: a join of a joined table
and a table in two table joins are refused at the user's line, and the workaround it gives
(read the topic twice, as two tables) works."""

from __future__ import annotations

import pytest

import samzapy
from samzapy.pipeline.api import PipelineError
from samzapy.pipeline.testing import PipelineHarness


def test_a_join_of_a_joined_table_is_refused_at_its_line() -> None:
    app = samzapy.App("chain")
    joined = app.table("users").join(app.table("settings"))
    joined.join(app.table("prefs")).to("out")
    with pytest.raises(PipelineError, match=r"test_pipeline_table_limits.py:\d+: a join of a joined table"):
        app.plan()


def test_a_table_in_two_table_joins_is_refused_naming_the_first() -> None:
    app = samzapy.App("twice")
    users = app.table("users")
    users.join(app.table("settings")).to("a")
    users.join(app.table("prefs")).to("b")
    with pytest.raises(
        PipelineError, match=r"already joined with a table at test_pipeline_table_limits.py:\d+"
    ):
        app.plan()


def test_the_topic_read_twice_as_two_tables_joins_twice() -> None:
    app = samzapy.App("twice")
    app.table("users").join(app.table("settings")).to("a")
    app.table("users", name="users-2").join(app.table("prefs")).to("b")
    with PipelineHarness(app) as h:
        h.send("users", "k", {"u": 1})
        h.send("settings", "k", {"s": 1})
        h.send("prefs", "k", {"p": 1})
        # the first change of each join: no joined record yet (a tombstone)
        assert h.outputs("a") == [("k", None), ("k", [{"u": 1}, {"s": 1}])]
        assert h.outputs("b") == [("k", None), ("k", [{"u": 1}, {"p": 1}])]

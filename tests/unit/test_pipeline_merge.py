"""Merges and co-partitioning: a stage keeping state per key after a merge of topics with
different partition counts is refused at the user's line, naming the merge, both when the
counts are declared (``partitions=``) and when a run learns them from the broker
(:func:`samzapy.pipeline.loader.check_copartitioning`); a key_by in between makes it fine."""

from __future__ import annotations

import pytest

import samzapy
from samzapy.pipeline.api import PipelineError
from samzapy.pipeline.loader import check_copartitioning
from samzapy.pipeline.testing import PipelineHarness


def _merged(left: int | None = 4, right: int | None = 8) -> tuple[samzapy.App, samzapy.Stream]:
    app = samzapy.App("merged")
    web = app.stream("web-clicks", partitions=left)
    mobile = app.stream("mobile-clicks", partitions=right)
    return app, web.merge(mobile)


def test_a_window_after_a_merge_of_differently_partitioned_topics_is_refused_naming_the_merge() -> None:
    _, clicks = _merged()
    with pytest.raises(PipelineError) as info:
        clicks.window(samzapy.tumbling(minutes=1), samzapy.count())
    message = str(info.value)
    assert message.startswith("test_pipeline_merge.py:")
    assert "window() of streams with different partition counts (merged at test_pipeline_merge.py:" in message
    assert "'web-clicks' at test_pipeline_merge.py:" in message and ": 4" in message
    assert "key_by the stream" in message


@pytest.mark.parametrize("stage", ["dedup", "join", "process"])
def test_other_keyed_stages_after_such_a_merge_are_refused(stage: str) -> None:
    app, clicks = _merged()
    with pytest.raises(
        PipelineError, match=rf"{stage}\(\) of streams with different partition counts \(merged at"
    ):
        if stage == "dedup":
            clicks.dedup(lambda v: v["id"], within=1000)
        elif stage == "join":
            clicks.join(app.table("users", partitions=4))
        else:
            clicks.process(lambda r, ctx: None, stores=["seen"])


def test_a_merge_then_key_by_then_window_is_accepted() -> None:
    _, clicks = _merged()
    clicks.key_by(lambda v: v["user"]).window(samzapy.tumbling(minutes=1), samzapy.count()).to("counts")


def test_a_stateless_merge_is_accepted_and_equal_counts_too() -> None:
    _, clicks = _merged()
    clicks.map(lambda v: v).to("all-clicks")
    _, same = _merged(4, 4)
    same.window(samzapy.tumbling(minutes=1), samzapy.count()).to("counts")


def test_a_merge_of_a_stream_without_keys_is_unkeyed() -> None:
    app = samzapy.App("merged")
    keyed = app.stream("a")
    unkeyed = app.stream("b", key=None)
    with pytest.raises(
        PipelineError, match=r"window\(\) needs a keyed stream.*key=None\) at test_pipeline_merge.py"
    ):
        keyed.merge(unkeyed).window()


def test_the_run_check_refuses_counts_learnt_from_the_broker() -> None:
    app, clicks = _merged(None, None)  # nothing declared: the build accepts it
    clicks.window(samzapy.tumbling(minutes=1), samzapy.count()).to("counts")
    with pytest.raises(PipelineError) as info:
        check_copartitioning(app.plan(), {"web-clicks": 2, "mobile-clicks": 3})
    message = str(info.value)
    assert "window of topics with different partition counts (merged at test_pipeline_merge.py:" in message
    assert "'web-clicks' has 2, 'mobile-clicks' has 3" in message
    check_copartitioning(app.plan(), {"web-clicks": 3, "mobile-clicks": 3})  # equal: fine


def test_merged_records_are_windowed_together() -> None:
    app, clicks = _merged(None, None)
    clicks.window(samzapy.tumbling(minutes=1), samzapy.count(), name="per-minute").to("counts")
    with PipelineHarness(app, partitions=2) as h:
        h.send("web-clicks", "ann", {"id": 1}, timestamp=1_000)
        h.send("mobile-clicks", "ann", {"id": 2}, timestamp=2_000)
        h.end_of_stream()
        assert [(k, v["value"]) for k, v in h.outputs("counts")] == [("ann", 2)]

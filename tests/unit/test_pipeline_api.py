"""The pipeline builder: stages located at the user's line, mistakes refused there, the
compiled plan's names, topics and stores, and the job configuration it renders."""

from __future__ import annotations

import pytest

import samzapy
from samzapy.config import Config, parse_job_config
from samzapy.pipeline import PipelineError
from samzapy.pipeline.compiler import TASK_CLASS


def _sketch() -> samzapy.App:
    app = samzapy.App("pageview-counts")
    views = app.stream("pageviews", value=samzapy.json)
    (
        views.filter(lambda v: v["page"] != "/health")
        .key_by(lambda v: v["user"])
        .window(samzapy.tumbling(hours=1), samzapy.count(), grace=samzapy.minutes(10), emit="final")
        .to("pageview-counts")
    )
    return app


def test_the_sketch_compiles_to_one_job_with_an_intermediate_topic_and_two_stores() -> None:
    plan = _sketch().plan()
    assert plan.inputs == ["pageviews", "pageview-counts-pageviews-repartition"]
    assert sorted(plan.stores) == ["pageviews-repartition", "pageviews-repartition-window"]
    assert {s.changelog for s in plan.stores.values()} == {
        "pageview-counts-pageviews-repartition-changelog",
        "pageview-counts-pageviews-repartition-window-changelog",
    }
    assert list(plan.outputs) == ["pageview-counts"]


def test_the_rendered_configuration_validates_and_locates_keys_at_the_users_lines() -> None:
    plan = _sketch().plan()
    props = plan.properties("app.py", "app.py")
    job = parse_job_config(Config(props, source="app.py"))
    assert [str(s) for s in job.inputs] == ["kafka.pageviews", "kafka.pageview-counts-pageviews-repartition"]
    assert job.window_ms == 1000
    by_key = {p.key: p for p in props}
    assert by_key["task.class"].value == TASK_CLASS
    window_line = next(n.where.line for n in plan.app.nodes if n.kind == "window")
    assert by_key["stores.pageviews-repartition-window.factory"].line == window_line
    assert by_key["stores.pageviews-repartition-window.factory"].source.endswith("test_pipeline_api.py")


def test_user_names_name_stores_and_intermediate_topics() -> None:
    app = samzapy.App("counts")
    (
        app.stream("views")
        .key_by(lambda v: v["user"], name="by-user")
        .window(samzapy.tumbling(minutes=5), name="per-5-min")
        .to("out")
    )
    plan = app.plan()
    assert plan.inputs == ["views", "counts-by-user"]
    assert sorted(plan.stores) == ["by-user", "per-5-min"]


def test_a_second_stage_of_the_same_kind_on_a_stream_gets_a_numbered_name() -> None:
    app = samzapy.App("twice")
    views = app.stream("views")
    views.window(samzapy.tumbling(minutes=1)).to("a")
    views.window(samzapy.tumbling(minutes=5)).to("b")
    assert sorted(app.plan().stores) == ["views-window", "views-window-2"]


def test_a_window_on_an_unkeyed_stream_is_refused_at_the_users_line() -> None:
    app = samzapy.App("logs")
    lines = app.stream("logs", key=None)
    with pytest.raises(PipelineError) as raised:
        lines.window(samzapy.tumbling(minutes=1))  # the line the error names
    line = raised.traceback[-1].lineno  # not used: the message carries the line
    assert line
    message = str(raised.value)
    assert message.startswith("test_pipeline_api.py:")
    assert "window() needs a keyed stream" in message
    assert "key_by(fn)" in message


def test_a_join_of_streams_with_different_partition_counts_is_refused_at_the_users_line() -> None:
    app = samzapy.App("join")
    left = app.stream("clicks", partitions=4)
    right = app.stream("impressions", partitions=8)
    with pytest.raises(
        PipelineError, match=r"test_pipeline_api.py:\d+: join\(\) of streams with different partition counts"
    ):
        left.join(right, within=1000)


def test_a_stage_without_a_function_is_refused() -> None:
    app = samzapy.App("bad")
    with pytest.raises(PipelineError, match=r"map\(\) needs a function, got str"):
        app.stream("in").map("upper")  # type: ignore[arg-type]


def test_writing_a_topic_the_job_reads_is_refused() -> None:
    app = samzapy.App("loop")
    app.stream("in").to("in")
    with pytest.raises(PipelineError, match="writes a topic this job reads"):
        app.plan()


def test_two_stages_with_one_user_name_are_refused() -> None:
    app = samzapy.App("dup")
    views = app.stream("views")
    views.window(name="w").to("a")
    views.dedup(lambda v: v["id"], within=1000, name="w").to("b")
    with pytest.raises(PipelineError, match="name 'w' is already the name of the stage at"):
        app.plan()


def test_the_signature_lists_stateful_steps_in_order_with_names_and_serdes() -> None:
    steps = _sketch().plan().signature()["steps"]
    assert [(s["kind"], s["name"]) for s in steps] == [
        ("key_by", "pageviews-repartition"),
        ("window", "pageviews-repartition-window"),
    ]
    assert steps[1]["window"] == "Tumbling(size_ms=3600000)"


def test_writing_window_results_with_a_serde_that_cannot_carry_them_is_refused_at_the_users_line() -> None:
    app = samzapy.App("serdes")
    counts = app.stream("views").window(samzapy.tumbling(minutes=1)).filter(lambda w: w["value"] > 1)
    with pytest.raises(PipelineError) as raised:
        counts.to("counts", value=samzapy.long)
    assert str(raised.value).startswith("test_pipeline_api.py:")
    assert (
        "to('counts') with the long serde cannot write the window results (dicts) of the window() at"
        in str(raised.value)
    )
    counts.map(lambda w: w["value"]).to("counts", value=samzapy.long)  # mapped to ints: fine


def test_names_that_cannot_name_topics_are_refused_at_the_users_line() -> None:
    with pytest.raises(PipelineError, match=r"test_pipeline_api.py:\d+: App needs a name .* got 'my job'"):
        samzapy.App("my job")
    app = samzapy.App("ok")
    with pytest.raises(PipelineError, match=r"test_pipeline_api.py:\d+: name= names stores and topics"):
        app.stream("in").window(name="per hour")

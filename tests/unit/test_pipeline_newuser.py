"""Pipeline bugs a new user met writing the docs' pipelines on a fresh clone (issue 29's
done-when): each test is the user's pipeline and the output the docs promise."""

from __future__ import annotations

import sys

import pytest

import samzapy
from samzapy.errors import SerdeError
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


def test_a_value_without_the_timestamp_field_says_which_source_and_how_to_fix_it():
    # timestamp="ts" on a source read with value=samzapy.string: the value is a str, and the
    # job stopped with "TypeError: string indices must be integers, not 'str'", no line.
    app = samzapy.App("ts-field")
    app.stream("views", value=samzapy.string, timestamp="ts").to("out")
    with PipelineHarness(app) as h, pytest.raises(LookupError) as raised:
        h.send("views", "ann", '{"ts": 5}')
    message = str(raised.value)
    assert "timestamp='ts'" in message and "test_pipeline_newuser.py:" in message
    assert "a str" in message and "value=samzapy.json" in message
    stopped = [n for n in raised.value.__notes__ if n.startswith("samzapy.testing: the task stopped")]
    assert "test_pipeline_newuser.py:" in stopped[0]  # the one-line Error names the line too


def test_a_value_the_output_serde_cannot_write_names_the_to_stage():
    # to(value=samzapy.long) given dicts: the Error line named the topic's config key but not
    # the user's to() line.
    app = samzapy.App("bad-out")
    app.stream("views").to("out", value=samzapy.long)
    line = sys._getframe().f_lineno - 1
    with PipelineHarness(app) as h, pytest.raises(SerdeError) as raised:
        h.send("views", "ann", {"page": "/a"})
    stopped = [n for n in raised.value.__notes__ if n.startswith("samzapy.testing: the task stopped")]
    assert f"to() at test_pipeline_newuser.py:{line}" in stopped[0]


def test_a_missing_app_file_is_named_as_typed(tmp_path, monkeypatch):
    # `samzapy run nope.py` said "Error: no app file '.' (--)".
    from samzapy.config import ConfigError
    from samzapy.pipeline.loader import load_app

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        load_app("nope.py")
    assert str(raised.value).startswith("no app file 'nope.py' (command line): give a Python file")


def _upper_app() -> samzapy.App:
    app = samzapy.App("upper")
    app.stream("words").map(str.upper).to("upper")
    return app


def test_a_misspelt_topic_or_store_in_a_pipeline_test_is_refused_with_the_names_there_are():
    # h.send("word", ...) was taken silently (no task reads it) and h.outputs("uper") was [],
    # so a test asserting "nothing came out" passed on a typo; h.store("x") said KeyError: 'x'.
    from samzapy.testing import HarnessError

    with PipelineHarness(_upper_app()) as h:
        with pytest.raises(
            HarnessError, match=r"'word' is not an input of pipeline 'upper' \(its inputs: words\)"
        ):
            h.send("word", "a", "x")
        with pytest.raises(
            HarnessError, match=r"'uper' is not written by pipeline 'upper' \(it writes: upper\)"
        ):
            h.outputs("uper")
        with pytest.raises(HarnessError, match=r"no store 'x' in pipeline 'upper' \(its stores: none\)"):
            h.store("x")
        h.send("words", "a", "x")
        assert h.outputs("upper") == [("a", "X")]


@pytest.mark.parametrize(
    ("spec", "aggregation", "expected"),
    [
        (samzapy.tumbling(hours=1), samzapy.count, r"window\(\)'s aggregation must be .* got function count"),
        (samzapy.count(), samzapy.tumbling(hours=1), r"window\(\)'s window must be .* got Aggregation"),
    ],
)
def test_a_window_given_the_wrong_kind_of_argument_is_refused_at_its_line(spec, aggregation, expected):
    # window(samzapy.tumbling(hours=1), samzapy.count) (the aggregation not called) and the two
    # arguments swapped crashed `samzapy describe` with "AttributeError: 'function' object has
    # no attribute 'kind' (raised at describe.py:52 in _detail)".
    app = samzapy.App("w")
    keyed = app.stream("views").key_by(lambda v: v["user"])
    with pytest.raises(samzapy.PipelineError, match=r"test_pipeline_newuser.py:\d+: " + expected):
        keyed.window(spec, aggregation)


def test_a_syntax_error_in_the_app_names_its_line_once(tmp_path, monkeypatch):
    # It said "SyntaxError: invalid syntax (app.py, line 2) (at <frozen importlib._bootstrap>:241
    # in _call_with_frames_removed)": the second place is importlib's, not the user's.
    from samzapy.config import ConfigError
    from samzapy.pipeline.loader import load_app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken_app.py").write_text("import samzapy\napp = samzapy.App('x'\n")
    with pytest.raises(ConfigError) as raised:
        load_app("broken_app.py")
    message = str(raised.value)
    assert message.startswith("importing the app broken_app.py raised SyntaxError: "), message
    assert "(broken_app.py, line 2)" in message and "frozen" not in message, message


def test_an_int_key_from_key_by_names_the_key_by_and_its_key_serde():
    # key_by(lambda v: v["user_id"]) with int ids: the Error named the intermediate topic's
    # config keys (systems.kafka.streams.<job>-...-repartition.samza.key.serde), not key_by.
    app = samzapy.App("int-key")
    views = app.stream("views", timestamp="ts")
    views.key_by(lambda v: v["user_id"]).window(samzapy.tumbling(hours=1), samzapy.count()).to("out")
    line = sys._getframe().f_lineno - 1
    with PipelineHarness(app) as h, pytest.raises(SerdeError) as raised:
        h.send("views", "x", {"user_id": 7, "ts": 0})
    message = str(raised.value)
    assert message.startswith(f"in the pipeline's key_by() at test_pipeline_newuser.py:{line}: "), message
    assert "key_by(..., key=samzapy.long)" in message

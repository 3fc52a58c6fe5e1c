"""Serdes by name or object (issue 29 item 1): a stage's ``key=``/``value=`` takes a serde
class or object as well as a name; the job's configuration registers it
(``serializers.registry.<name>.class``) and the records go through it, in the harness as in a
run (the same configuration is parsed)."""

from __future__ import annotations

from typing import Any

import pytest

import samzapy
from samzapy.pipeline.api import PipelineError
from samzapy.pipeline.serde_objects import registered
from samzapy.pipeline.testing import PipelineHarness
from samzapy.serdes import JsonSerde


class CsvSerde:
    """``"a,b"`` <-> ``["a", "b"]`` (a module-level class: registered by its import path)."""

    def to_bytes(self, obj: Any) -> bytes:
        return ",".join(obj).encode()

    def from_bytes(self, data: bytes) -> Any:
        return data.decode().split(",")


class Prefixed:
    """A serde with state: values written as ``prefix + text``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def to_bytes(self, obj: Any) -> bytes:
        return (self.prefix + obj).encode()

    def from_bytes(self, data: bytes) -> Any:
        return data.decode().removeprefix(self.prefix)


def _props(app: samzapy.App) -> dict[str, str]:
    return {p.key: p.value for p in app.plan().properties("app.py", None)}


def test_a_serde_class_is_registered_by_its_import_path_and_used() -> None:
    app = samzapy.App("csv")
    app.stream("rows", value=CsvSerde).map(lambda cells: [c.upper() for c in cells]).to("upper")
    props = _props(app)
    assert props["systems.kafka.streams.rows.samza.msg.serde"] == "CsvSerde"
    assert props["serializers.registry.CsvSerde.class"] == f"{__name__}:CsvSerde"
    with PipelineHarness(app) as h:
        h.send("rows", "k", ["a", "b"])
        assert h.records("rows")[0].value == b"a,b"
        assert h.records("upper")[0].value == b"A,B"  # to() keeps the stream's serde
        assert h.outputs("upper") == [("k", ["A", "B"])]


def test_a_serde_object_keeps_its_state() -> None:
    shout = Prefixed(">> ")
    app = samzapy.App("prefixed")
    app.stream("words", value=samzapy.string).map(str.upper).to("shouted", value=shout)
    props = _props(app)
    name = props["systems.kafka.streams.shouted.samza.msg.serde"]
    assert name.startswith("Prefixed_object")
    assert props[f"serializers.registry.{name}.class"] == f"samzapy.pipeline.serde_objects:registered.{name}"
    with PipelineHarness(app) as h:
        h.send("words", "k", "hi")
        assert h.records("shouted")[0].value == b">> HI"
        assert h.outputs("shouted") == [("k", "HI")]


def test_two_objects_of_one_class_get_two_names_and_one_object_one() -> None:
    a, b = Prefixed("a:"), Prefixed("b:")
    app = samzapy.App("two")
    s = app.stream("in", value=a)
    s.to("out-a", value=a)
    s.to("out-b", value=b)
    props = _props(app)
    names = [props[f"systems.kafka.streams.{t}.samza.msg.serde"] for t in ("in", "out-a", "out-b")]
    assert names[0] == names[1] != names[2]


def test_a_builtin_serde_class_is_its_builtin_name() -> None:
    app = samzapy.App("builtin")
    app.stream("in", value=JsonSerde).to("out")
    assert "serializers.registry.json.class" not in _props(app)
    assert app.nodes[0].value_serde == "json"


def test_something_that_is_no_serde_is_refused_at_the_users_line() -> None:
    app = samzapy.App("bad")
    with pytest.raises(TypeError, match=r"test_pipeline_serdes.py:\d+: value must be a serde: .* got 42"):
        app.stream("in", value=42)  # int has to_bytes and from_bytes, but is no serde


def test_a_store_of_process_takes_a_serde_object() -> None:
    app = samzapy.App("stores")
    seen = samzapy.store("seen", value=CsvSerde)

    def remember(record: Any, ctx: Any) -> None:
        ctx.stores["seen"].put(record.key, [record.value, "x"])

    app.stream("in", value=samzapy.string).process(remember, stores=[seen])
    with PipelineHarness(app) as h:
        h.send("in", "k", "v")
        assert h.store("seen") == {"k": ["v", "x"]}


def test_an_object_missing_from_the_process_says_why() -> None:
    with pytest.raises(Exception, match=r"the serde object 'Nope_object' is not in this process"):
        registered.__getattr__("Nope_object")()


def test_a_window_on_a_stream_written_with_an_object_serde_is_still_checked() -> None:
    app = samzapy.App("checked")
    with pytest.raises(PipelineError, match=r"window\(\) needs a keyed stream"):
        app.stream("in", key=None, value=CsvSerde).window()

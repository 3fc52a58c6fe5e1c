"""A bad serde name in a pipeline is reported once, at the line that wrote it, not again at
each stage that inherits it (``to()``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.errors import ConfigError
from samzapy.pipeline.loader import pipeline_config

TAIL = "must be a built-in serde (string, json, integer, long, bytes) or registered with"


def _problems(tmp_path: Path, body: str) -> list[str]:
    app = tmp_path / "bad_serde_app.py"
    app.write_text("import samzapy\n\napp = samzapy.App('bad')\n" + body)
    with pytest.raises(ConfigError) as caught:
        pipeline_config(str(app))
    return [p.replace(str(app), "APP") for p in caught.value.problems]  # type: ignore[attr-defined]


def test_a_bad_source_serde_is_reported_once_at_the_source(tmp_path: Path) -> None:
    body = "views = app.stream('views', value='jsno')\nviews.filter(lambda v: True).to('out')\n"
    assert _problems(tmp_path, body) == [
        "Unknown serde 'jsno' at APP:4 (for 'systems.kafka.streams.views.samza.msg.serde' and the stages"
        f" that inherit it): did you mean 'json'? {TAIL} serializers.registry.jsno.class"
    ]


def test_a_bad_serde_written_on_to_is_reported_at_to(tmp_path: Path) -> None:
    body = "views = app.stream('views')\nviews.to('out', key='strng')\n"
    assert _problems(tmp_path, body) == [
        "Unknown serde 'strng' at APP:5 (for 'systems.kafka.streams.out.samza.key.serde' and the stages"
        f" that inherit it): did you mean 'string'? {TAIL} serializers.registry.strng.class"
    ]


def test_a_registered_serde_passes(tmp_path: Path) -> None:
    app = tmp_path / "good_serde_app.py"
    app.write_text(
        "import samzapy\n\napp = samzapy.App('good')\n"
        "app.config['serializers.registry.mine.class'] = 'samzapy.serdes:JsonSerde'\n"
        "app.stream('views', value='mine').to('out')\n"
    )
    config = pipeline_config(str(app))
    assert config["systems.kafka.streams.out.samza.msg.serde"] == "mine"


def test_the_harness_reports_it_once_too() -> None:
    import samzapy
    from samzapy.pipeline.testing import PipelineHarness

    app = samzapy.App("bad")
    app.stream("views", value="jsno").to("out")
    with pytest.raises(ConfigError) as caught:
        PipelineHarness(app)
    assert len(caught.value.problems) == 1  # type: ignore[attr-defined]
    assert "Unknown serde 'jsno' at " in str(caught.value)

"""``samzapy replay app.py``: the pipeline as the positional CONFIG (issue 29's form), the
older ``--config-path app.py`` kept; with the app positional, ``--config-path`` adds a
``.properties`` file. Checked up to the config, which fails before Spark is started."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.cli import main

BAD_APP = """import samzapy

app = samzapy.App("bad")
app.stream("views", key=None).window()
"""

GOOD_APP = """import samzapy

app = samzapy.App("good")
app.stream("views").map(str).to("out")
"""


@pytest.mark.parametrize("form", [["APP"], ["--config-path", "APP"]])
def test_the_app_is_loaded_from_either_form(tmp_path: Path, form: list[str]) -> None:
    app = tmp_path / "app.py"
    app.write_text(BAD_APP)
    args = ["replay", *(str(app) if a == "APP" else a for a in form)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "app.py:4: window() needs a keyed stream" in result.output


def test_a_properties_file_goes_with_the_positional_app(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(GOOD_APP)
    extra = tmp_path / "extra.properties"
    extra.write_text("task.class=x:Y\n")
    result = CliRunner().invoke(main, ["replay", str(app), "--config-path", str(extra)])
    assert result.exit_code == 2, result.output
    assert "'task.class' (" in result.output and "extra.properties:1) is set by the pipeline" in result.output


def test_no_config_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["replay"])
    assert result.exit_code == 2
    assert "give the job's config: CONFIG or --config-path CONFIG" in result.output

"""Finding a pipeline app for ``samzapy run`` / ``describe``: files and modules, what is wrong
with them said before anything connects, and ``describe --properties`` as a job file the state
tools read."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from samzapy.cli.app import main
from samzapy.config import load_config, parse_job_config
from samzapy.errors import ConfigError
from samzapy.pipeline.loader import is_app_spec, load_app, pipeline_config

APP = "import samzapy\napp = samzapy.App('{name}')\napp.stream('in').map(str.upper).to('out')\n"


def test_targets_that_name_apps_and_targets_that_name_properties_files() -> None:
    assert is_app_spec("app.py") and is_app_spec("app.py:app") and is_app_spec("pkg.mod:app")
    assert not is_app_spec("job.properties") and not is_app_spec("config/pageview-counter.properties")


def test_an_app_file_is_imported_once_and_its_app_found(tmp_path: Path) -> None:
    path = tmp_path / "upper_once.py"
    path.write_text(APP.format(name="upper"))
    app = load_app(str(path))
    assert app.name == "upper"
    assert load_app(str(path)) is app


def test_a_module_with_two_apps_must_name_one(tmp_path: Path) -> None:
    path = tmp_path / "two_apps.py"
    path.write_text(APP.format(name="a") + "other = samzapy.App('b')\nother.stream('x').to('y')\n")
    with pytest.raises(
        ConfigError, match=r"defines several apps \(app, other\): name one, as .*two_apps.py:app"
    ):
        load_app(str(path))
    assert load_app(f"{path}:other").name == "b"


def test_an_app_that_raises_while_importing_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "broken_app.py"
    path.write_text("import samzapy\napp = samzapy.App('x')\n{}['missing']\n")
    with pytest.raises(
        ConfigError, match=r"importing the app broken_app.py raised KeyError: 'missing' \(at broken_app.py:3"
    ):
        load_app(str(path))


def test_a_missing_app_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no app file"):
        load_app(str(tmp_path / "nope.py"))


def test_an_importable_module_app_loads() -> None:
    config = pipeline_config("samzapy.jobs.pageview_counter_pipeline:app")
    assert config["job.name"] == "pageview-counter-pipeline"
    assert config["pipeline.app"] == "samzapy.jobs.pageview_counter_pipeline:app"


def test_a_properties_file_adds_keys_and_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "upper_props.py"
    path.write_text(APP.format(name="upper-props"))
    extra = tmp_path / "extra.properties"
    extra.write_text("task.commit.ms=5000\nmetrics.reporters=\n")
    config = pipeline_config(str(path), ["task.commit.ms=7000"], str(extra))
    assert config["task.commit.ms"] == "7000"
    assert config.location("task.commit.ms") == "--config"
    assert parse_job_config(config).commit_ms == 7000


def test_describe_properties_is_a_job_file_the_tools_can_read(tmp_path: Path) -> None:
    path = tmp_path / "upper_describe.py"
    path.write_text(APP.format(name="upper-describe"))
    result = CliRunner().invoke(main, ["describe", str(path), "--properties"])
    assert result.exit_code == 0, result.output
    job_file = tmp_path / "job.properties"
    job_file.write_text(result.output)
    job = parse_job_config(load_config(job_file))
    assert job.job_name == "upper-describe"
    assert [str(s) for s in job.inputs] == ["kafka.in"]


def test_keys_the_pipeline_sets_are_refused_from_a_properties_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "upper_keys.py"
    path.write_text(APP.format(name="upper-keys"))
    extra = tmp_path / "extra.properties"
    extra.write_text("# more\ntask.inputs=kafka.other\n")
    with pytest.raises(ConfigError) as raised:
        pipeline_config(str(path), ["task.class=x:Y"], str(extra))
    message = str(raised.value)
    assert f"'task.inputs' ({extra}:2) is set by the pipeline" in message
    assert "'task.class' (--config) is set by the pipeline" in message

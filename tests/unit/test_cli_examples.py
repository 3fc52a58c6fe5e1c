"""``samzapy examples list|copy``: the example jobs the docs name, reachable from any install."""

from __future__ import annotations

from click.testing import CliRunner

from samzapy.cli.app import main
from samzapy.config import load_config, parse_job_config


def test_list_names_every_example_with_its_config_and_code():
    result = CliRunner().invoke(main, ["examples", "list"])

    assert result.exit_code == 0, result.output
    assert "pageview-counter\n    Page views per user per hour, stage 2 of 2:" in result.output
    assert "pageview_counter.py (PageViewCounterTask)" in result.output
    assert result.output.count("    config: ") == 9


def test_a_copied_example_runs_its_own_copy_of_the_task(tmp_path):
    result = CliRunner().invoke(main, ["examples", "copy", "pageview-filter", str(tmp_path / "mine")])

    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == [
        "pageview-filter.properties",
        "pageview_filter.py",
    ]
    config = load_config(tmp_path / "mine" / "pageview-filter.properties")
    assert config.get("task.class") == "pageview_filter:PageViewFilterTask"
    job = parse_job_config(config, check_task_class=True)  # found next to the properties file
    assert job.job_name == "pageview-filter"


def test_copy_of_an_unknown_example_names_the_known_ones(tmp_path):
    result = CliRunner().invoke(main, ["examples", "copy", "nope", str(tmp_path)])

    assert result.exit_code == 2
    assert "Invalid value for NAME: no example 'nope': one of ad-click-join, " in result.output


def test_copy_never_overwrites(tmp_path):
    (tmp_path / "pageview-filter.properties").write_text("mine")
    result = CliRunner().invoke(main, ["examples", "copy", "pageview-filter", str(tmp_path)])

    assert result.exit_code == 2 and "exists already" in result.output
    assert (tmp_path / "pageview-filter.properties").read_text() == "mine"

"""The recorded plan: an unchanged or additive plan runs, a renamed, reordered or changed
stateful step is refused with the difference and what to do, unless accepted; and
``samzapy describe`` prints the plan."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import samzapy
from samzapy.cli.app import main
from samzapy.errors import ConfigError
from samzapy.pipeline.plan_check import check_and_record


class MemoryRecord:
    """The recorded plan kept in memory (the Kafka topic's stand-in; the check is under test)."""

    def __init__(self) -> None:
        self.value: dict[str, Any] | None = None
        self.writes = 0

    def read(self) -> dict[str, Any] | None:
        return self.value

    def write(self, signature: dict[str, Any]) -> None:
        self.value = signature
        self.writes += 1


def _app(
    *, window_name: str | None = None, extra: bool = False, minutes: int = 60, swap: bool = False
) -> Any:
    app = samzapy.App("counts")
    views = app.stream("views", timestamp="ts")
    by_user = views.key_by(lambda v: v["user"], name="by-user")
    first, second = (samzapy.tumbling(minutes=minutes), samzapy.session(minutes=5))
    if swap:
        first, second = second, first
    by_user.window(first, name=window_name).to("hourly")
    by_user.window(second, samzapy.sum("n"), name="sessions").to("sessions")
    if extra:
        views.dedup(lambda v: v["id"], within=60_000).to("unique")
    return app


def test_the_first_run_records_the_plan_and_an_unchanged_one_runs() -> None:
    record = MemoryRecord()
    assert check_and_record(record, _app().plan().signature(), accept=False) == []
    assert check_and_record(record, _app().plan().signature(), accept=False) == []
    assert record.writes == 1


def test_an_added_stateful_step_is_accepted_and_recorded() -> None:
    record = MemoryRecord()
    check_and_record(record, _app().plan().signature(), accept=False)
    assert check_and_record(record, _app(extra=True).plan().signature(), accept=False) == []
    assert [s["name"] for s in record.value["steps"]][-1] == "views-dedup"


def test_a_renamed_step_is_refused_with_the_name_to_give_back() -> None:
    record = MemoryRecord()
    check_and_record(record, _app().plan().signature(), accept=False)
    with pytest.raises(ConfigError) as raised:
        check_and_record(record, _app(window_name="hourly").plan().signature(), accept=False)
    message = str(raised.value)
    assert "window 'by-user-window' is gone (its store by-user-window would be orphaned)" in message
    assert "give it name='by-user-window' to keep its state" in message
    assert "--config pipeline.plan.accept=true" in message


def test_reordered_steps_with_generated_names_are_refused_as_changed() -> None:
    record = MemoryRecord()
    check_and_record(record, _app().plan().signature(), accept=False)
    with pytest.raises(ConfigError, match=r"window 'by-user-window' \(now at .*\) changed: window"):
        check_and_record(record, _app(swap=True).plan().signature(), accept=False)


def test_a_changed_window_is_refused_and_an_accepted_change_is_recorded() -> None:
    record = MemoryRecord()
    check_and_record(record, _app().plan().signature(), accept=False)
    changed = _app(minutes=30).plan().signature()
    with pytest.raises(ConfigError, match="Tumbling.size_ms=3600000.* -> .Tumbling.size_ms=1800000"):
        check_and_record(record, changed, accept=False)
    assert len(check_and_record(record, changed, accept=True)) == 1
    assert check_and_record(record, changed, accept=False) == []


def test_a_changed_key_function_is_refused() -> None:
    record = MemoryRecord()
    check_and_record(record, _app().plan().signature(), accept=False)
    app = samzapy.App("counts")
    views = app.stream("views", timestamp="ts")
    by_user = views.key_by(lambda v: v["account"], name="by-user")
    by_user.window(samzapy.tumbling(minutes=60)).to("hourly")
    by_user.window(samzapy.session(minutes=5), samzapy.sum("n"), name="sessions").to("sessions")
    with pytest.raises(ConfigError, match="key_by 'by-user' .* changed: key_fn"):
        check_and_record(record, app.plan().signature(), accept=False)


def test_describe_prints_stages_topics_stores_and_the_job_configuration(tmp_path: Path) -> None:
    app_file = tmp_path / "counts_app.py"
    app_file.write_text(
        "import samzapy\n"
        "app = samzapy.App('counts')\n"
        "views = app.stream('views', timestamp='ts')\n"
        "views.key_by(lambda v: v['user']).window(samzapy.tumbling(hours=1), name='hourly').to('hourly')\n"
    )
    result = CliRunner().invoke(main, ["describe", str(app_file)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert re.search(
        r"\n  counts_app.py:4 +window +hourly: Tumbling\(size_ms=3600000\) count, grace 0 ms", out
    )
    assert "  counts-views-repartition (intermediate: written and read by the job)\n" in out
    assert "  counts-hourly-changelog (changelog, compacted)\n" in out
    assert "  task.inputs=kafka.views,kafka.counts-views-repartition\n" in out


def test_describe_of_a_bad_stage_exits_2_naming_the_users_line(tmp_path: Path) -> None:
    app_file = tmp_path / "bad_app.py"
    app_file.write_text(
        "import samzapy\napp = samzapy.App('bad')\nlogs = app.stream('logs', key=None)\n"
        "logs.window(samzapy.tumbling(minutes=1)).to('out')\n"
    )
    result = CliRunner().invoke(main, ["describe", str(app_file)])
    assert result.exit_code == 2
    assert "Error: bad_app.py:4: window() needs a keyed stream" in result.output

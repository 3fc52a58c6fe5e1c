"""Rough edges a new user met on a fresh clone, following the README and docs alone (issues
29 and 31): each test is what the user did, and what they should have seen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_a_pipeline_test_without_the_plugin_shows_no_dependency_warnings(tmp_path):
    # A user's first pipeline test, run with plain pytest (no conftest.py): importing
    # samzapy.pipeline imports kafka-python, whose ~200 DeprecationWarnings buried the summary.
    (tmp_path / "test_upper.py").write_text(
        "import samzapy\n"
        "from samzapy.pipeline.testing import PipelineHarness\n\n"
        "def test_upper():\n"
        "    app = samzapy.App('upper')\n"
        "    app.stream('words').map(str.upper).to('upper')\n"
        "    with PipelineHarness(app) as h:\n"
        "        h.send('words', 'a', 'x')\n"
        "        assert h.outputs('upper') == [('a', 'X')]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_upper.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout.lower(), done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("1 passed"), done.stdout


def test_the_pipeline_names_are_visible_to_dir_and_type_checkers_without_importing_them():
    # samzapy.App came from a module __getattr__ typed `-> object`: mypy said '"object" not
    # callable' at the user's `app = samzapy.App(...)`, and dir(samzapy) had no App.
    code = (
        "import sys, samzapy\n"
        "assert {'App', 'tumbling', 'json'} <= set(dir(samzapy)), dir(samzapy)\n"
        "assert {'App', 'tumbling', 'json'} <= set(samzapy.__all__)\n"
        "assert 'samzapy.pipeline' not in sys.modules  # still imported on first use only\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    source = (ROOT / "samzapy" / "__init__.py").read_text()
    typed = source.split("from samzapy.pipeline import (", 1)[1].split(")", 1)[0]
    assert {"App", "tumbling", "count", "json"} <= set(typed.replace(",", " ").split())


def test_a_local_checkpoint_of_another_jobs_store_says_why_and_what_to_do(tmp_path, caplog):
    # Two apps in one directory with a store of the same name ('totals') share state/totals/:
    # each run of one warned "local checkpoint ... is of nu-leak-a-totals-changelog/0, not
    # nu-leak-b-totals-changelog/0: ignored" and restored from scratch, with no word of why.
    import json

    from samzapy.stores.checkpoints import LocalCheckpoints, checkpoints_dir

    store_dir = tmp_path / "state" / "totals" / "Partition_0"
    other = checkpoints_dir(store_dir) / "7"
    other.mkdir(parents=True)
    (other / "OFFSET").write_text(json.dumps({"topic": "a-totals-changelog", "partition": 0, "offset": 7}))
    with caplog.at_level("WARNING"):
        assert LocalCheckpoints(store_dir, "b-totals-changelog", 0).newest_first() == []
    (record,) = caplog.records
    assert "is of a-totals-changelog/0, not b-totals-changelog/0: ignored" in record.getMessage()
    assert "job.logged.store.base.dir" in record.getMessage()


def test_the_pipeline_examples_are_listed_and_copied(tmp_path):
    # `samzapy examples list` showed only the task jobs: the pipelines in jobs/*_pipeline.py
    # (docs/pipelines.md) could not be found from the command line; and each summary stopped
    # mid-sentence where its second comment line ended ("... join.time=event). Unlike").
    from click.testing import CliRunner

    from samzapy.cli.app import main

    listed = CliRunner().invoke(main, ["examples", "list"])
    assert listed.exit_code == 0, listed.output
    assert (
        "pageview-counter-pipeline\n    Page views per user per hour as a pipeline.\n"
        "    code:   " in listed.output
    )
    assert "    run:    samzapy run samzapy.jobs.pageview_counter_pipeline:app\n" in listed.output
    assert "join on a versioned table, join.time=event).\n" in listed.output
    copied = CliRunner().invoke(main, ["examples", "copy", "pageview-counter-pipeline", str(tmp_path)])
    assert copied.exit_code == 0, copied.output
    assert [p.name for p in tmp_path.iterdir()] == ["pageview_counter_pipeline.py"]
    assert copied.output.endswith(f"run it: samzapy run {tmp_path / 'pageview_counter_pipeline.py'}\n")
    described = CliRunner().invoke(main, ["describe", str(tmp_path / "pageview_counter_pipeline.py")])
    assert described.exit_code == 0 and "pipeline pageview-counter-pipeline" in described.output

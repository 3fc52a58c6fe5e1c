"""The examples of docs/operations.md, "State as data", run verbatim in order against a job on
the dev broker, and do what the page says."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from state_support import changelog_state, counting_config, produce_views, run_counting, views

from samzapy.kafka.admin import TopicAdmin
from samzapy.tools.state_storage import main as state_storage_tool

pytestmark = [pytest.mark.spark, pytest.mark.integration]

DOC = Path(__file__).parents[2] / "docs" / "operations.md"


def examples() -> list[tuple[str, str]]:
    """(language, code) of every fenced block of the section, in order."""
    text = DOC.read_text()
    section = text.split("\n## State as data\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(python|console)\n(.*?)```", section, flags=re.DOTALL)


def run_console(block: str) -> None:
    for line in block.splitlines():
        if not line.startswith("$ "):
            continue
        argv = shlex.split(line[2:])
        assert argv[0] == "state-storage-tool", line
        result = CliRunner().invoke(state_storage_tool, argv[1:])
        assert result.exit_code == 0, (line, result.output)


def test_state_as_data_examples_run_as_written(tmp_path, broker, spark, monkeypatch):
    name = f"docs-{tmp_path.name[-12:]}"
    records = views(300, 20, seed=7) + [(b"test-1", {"user_id": "test-1", "view_id": "t1"})]
    counts = produce_views(broker, f"{name}-in", 4, records)
    config = counting_config(tmp_path, broker, name, f"{name}-in")
    run_counting(config, tmp_path / "metrics.json")
    shutil.copy(config, tmp_path / "job.properties")
    monkeypatch.chdir(tmp_path)

    blocks = examples()
    assert [lang for lang, _ in blocks] == ["python", "console", "python", "python", "console"]
    namespace: dict = {}
    for lang, code in blocks:
        if lang == "python":
            exec(compile(code, str(DOC), "exec"), namespace)
        else:
            run_console(code)

    assert (tmp_path / "counts-parquet").is_dir() and list((tmp_path / "counts-avro").glob("part-*.avro"))
    assert namespace["stats"].keys == len(counts)
    want = {u: n for u, n in counts.items() if not u.startswith("test-")}
    with TopicAdmin(broker) as admin:
        assert admin.partition_count(f"{name}-changelog") == 8  # resharded
    state = changelog_state(broker, f"{name}-changelog")
    assert {u: n for kv in state.values() for u, n in kv.items()} == want  # migrated: test users gone

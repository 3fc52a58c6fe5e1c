"""A pipeline killed with kill -9 while its input arrives, restarted each time, ends with the
outputs its in-process run gives (ids and bytes; a re-sent output is the same bytes under the
same id) — the window state restored exactly from the changelogs across the rounds.

The pipeline (a key_by and an hourly window) runs from its job configuration
(``samzapy describe --properties``), as any job: the jobs_support crash rounds start it with
``samzapy run job.properties`` and read its checkpoints."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from jobs_support import Feeder, crash_rounds, dedup_by_id, run_to_end  # noqa: E402
from support import consume_all, create_topic  # noqa: E402

from samzapy.cli.app import main  # noqa: E402
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json  # noqa: E402
from samzapy.pipeline.testing import PipelineHarness  # noqa: E402
from samzapy.testing import distinct_by_id  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 2
APP = """\
import samzapy

app = samzapy.App("{name}")
views = app.stream("{name}-views", timestamp="ts")
(views.key_by(lambda v: v["user_id"], name="by-user")
      .window(samzapy.tumbling(hours=1), samzapy.count(), grace=samzapy.minutes(10), name="hourly")
      .to("{name}-counts"))
"""


def _job_file(tmp_path: Path, app_file: Path, broker: str, name: str) -> Path:
    result = CliRunner().invoke(main, ["describe", str(app_file), "--properties"])
    assert result.exit_code == 0, result.output
    extra = [
        f"systems.kafka.consumer.bootstrap.servers={broker}",
        f"job.logged.store.base.dir={tmp_path / 'state'}",
        "task.commit.ms=300",
        f"systems.kafka.streams.{name}-by-user.partitions={PARTITIONS}",
        f"pipeline.tasks={PARTITIONS}",
    ]
    path = tmp_path / "job.properties"
    path.write_text(result.output + "\n".join(extra) + "\n")
    return path


def _expected(app_file: Path, name: str, views: list) -> dict:
    spec = importlib.util.spec_from_file_location(f"crash_{app_file.stem}", app_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with PipelineHarness(module.app, partitions=PARTITIONS) as h:
        h.send_all(f"{name}-views", [(k.decode(), v) for k, v in views])
        h.window()
        h.end_of_stream()
        return {i: (r.key, r.value) for i, r in distinct_by_id(h.records(f"{name}-counts")).items()}


def test_a_pipeline_killed_9_times_ends_with_its_in_process_outputs(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    name = topic_name[:40].rstrip("-")
    views = list(pageviews(PageViewSpec(count=3_000, users=30, pages=8, seed=seed)))
    create_topic(broker, f"{name}-views", PARTITIONS)
    app_file = tmp_path / "crashed_app.py"
    app_file.write_text(APP.format(name=name))
    job = _job_file(tmp_path, app_file, broker, name)
    feeder = Feeder(
        lambda chunk: produce_json(broker, f"{name}-views", PARTITIONS, chunk),
        views,
        chunks=8,
        pause_s=0.7,
        finish=lambda: produce_end_of_stream(broker, f"{name}-views"),
    )
    feeder.start()
    delays = crash_rounds([job], broker, 3, rng, tmp_path / "job.log")
    feeder.join_checked()
    run_to_end(job)
    got = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, f"{name}-counts")).items()}
    want = _expected(app_file, name, views)
    assert len(want) > 20
    assert got == want, f"seed {seed}, kill delays {delays}"

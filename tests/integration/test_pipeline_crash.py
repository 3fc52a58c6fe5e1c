"""Pipelines killed with kill -9 and restarted, as any job.

* A pipeline (a key_by and an hourly window) killed while its input arrives ends with the
  outputs its in-process run gives (ids and bytes; a re-sent output is the same bytes under the
  same id): the window state restored exactly from the changelogs across the rounds.
* The table-table join as a pipeline (jobs/profile_settings_join_pipeline.py's stage, on test
  topics) and as its task version (``config/profile-settings-join.properties``), each killed
  mid-way over the same backlog, end with the same changes (ids and bytes) and the same stores
  (each store's changelog folded to its last value per key).

The pipelines run from their job configuration (``samzapy describe --properties``): the crash
rounds start them with ``samzapy run job.properties`` and read their checkpoints."""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from jobs_support import (  # noqa: E402
    Feeder,
    _committed_progress,
    checkpoint_history,
    crash_rounds,
    dedup_by_id,
    job_config,
    run_to_end,
)
from support import consume_all, create_topic, kill9, start_job  # noqa: E402

from samzapy.cli.app import main  # noqa: E402
from samzapy.config import load_config  # noqa: E402
from samzapy.generate import (  # noqa: E402
    PageViewSpec,
    pageviews,
    produce_end_of_stream,
    produce_json,
    profiles,
    settings,
)
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


#: Updates per table: a backlog that lasts a few commits, so the kills fall in the middle.
COUNT = 8_000

TABLES_APP = """\
import samzapy

app = samzapy.App("{name}")
profiles = app.table("{name}-profiles", name="profiles")
settings = app.table("{name}-settings", name="settings")
profiles.join(
    settings,
    lambda user, profile, setting: {{"user_id": user, "profile": profile, "settings": setting}},
    with_key=True,
    name="tt",
).to("{name}-changes")
"""


def _kill_rounds(config: Path, rounds: int, rng: random.Random, log: Path) -> list[float]:
    """``rounds`` times: start the job, wait until it has committed progress (at most 10 s: a
    job whose backlog is done is killed idle), kill -9 it after up to 0.3 s more."""
    delays = []
    for _ in range(rounds):
        history = checkpoint_history(broker_of(config), config)
        job = start_job(config, log=log)
        for _ in range(100):
            if _committed_progress(broker_of(config), config, history) or job.poll() is not None:
                break
            time.sleep(0.1)
        assert job.poll() is None, f"{config.name} exited with {job.returncode}; see {log}"
        delays.append(round(rng.uniform(0.0, 0.3), 2))
        time.sleep(delays[-1])
        kill9(job)
    return delays


def broker_of(config: Path) -> str:
    """The bootstrap servers of a job file."""
    return load_config(config).get_str("systems.kafka.consumer.bootstrap.servers")


def _store_contents(broker: str, config: Path, stores: list[str]) -> list[dict]:
    """Each store's changelog folded to its last value per (partition, key): the stores after
    the last run (which ended with a commit), undo records of the crashed runs included."""
    props = load_config(config)
    found = []
    for store in stores:
        table: dict = {}
        for record in consume_all(broker, props.get_str(f"stores.{store}.changelog").partition(".")[2]):
            table[(record.partition, record.key)] = record.value
        found.append({k: v for k, v in table.items() if v is not None})
    return found


def test_the_table_join_pipeline_and_its_task_version_killed_9_times_end_alike(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    name = topic_name[:36].rstrip("-") + "-tt"
    left = list(profiles(COUNT, 400, seed=seed, delete_fraction=0.05))
    right = list(settings(COUNT, 400, seed=seed + 1, delete_fraction=0.05))
    for topic in ("profiles", "settings"):
        create_topic(broker, f"{name}-{topic}", PARTITIONS)
    for start in range(0, COUNT, 1_000):  # a backlog, interleaved: its timestamp order is the order
        produce_json(broker, f"{name}-profiles", PARTITIONS, left[start : start + 1_000])
        produce_json(broker, f"{name}-settings", PARTITIONS, right[start : start + 1_000])
    app_file = tmp_path / "tables_app.py"
    app_file.write_text(TABLES_APP.format(name=name))
    pipeline = _job_file(tmp_path, app_file, broker, name)
    with pipeline.open("a") as out:
        out.write("task.commit.ms=100\n")  # as the task version's below: commits while the backlog lasts
    task = job_config(
        tmp_path,
        broker,
        "profile-settings-join.properties",
        name,
        {
            "task.inputs": f"kafka.{name}-profiles,kafka.{name}-settings",
            "join.left.stream": f"{name}-profiles",
            "join.right.stream": f"{name}-settings",
            "join.output.stream": f"kafka.{name}-task-changes",
            "task.commit.ms": "100",
        },
    )
    delays = [_kill_rounds(job, 2, rng, tmp_path / "job.log") for job in (task, pipeline)]
    for job in (task, pipeline):
        run_to_end(job)
    task_out = {
        i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, f"{name}-task-changes")).items()
    }
    pipe_out = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, f"{name}-changes")).items()}
    assert len(task_out) == 2 * COUNT  # one change per update, each named by the versions it joined
    assert pipe_out == task_out, f"seed {seed}, kill delays {delays}"
    task_stores = _store_contents(broker, task, ["profiles", "settings", "joined"])
    assert _store_contents(broker, pipeline, ["profiles", "settings", "tt-joined"]) == task_stores
    assert all(task_stores)

"""A pipeline on the real dev broker: ``samzapy run app.py --exit-at-end`` in a subprocess gives
the results the in-process PipelineHarness gives (same ids and bytes), and a later run with a
renamed stateful step is refused until the change is accepted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from jobs_support import dedup_by_id  # noqa: E402
from support import consume_all, run_job  # noqa: E402

from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json  # noqa: E402
from samzapy.pipeline.testing import PipelineHarness  # noqa: E402
from samzapy.testing import distinct_by_id  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 2
APP = """\
import samzapy

app = samzapy.App("{name}")
views = app.stream("{name}-views", timestamp="ts")
(views.filter(lambda v: v["page"] != "/page/0")
      .key_by(lambda v: v["user_id"])
      .window(samzapy.tumbling(hours=1), samzapy.count(), grace=samzapy.minutes(10){extra})
      .to("{name}-counts"))
"""


def _write_app(path: Path, name: str, extra: str = "") -> Path:
    path.write_text(APP.format(name=name, extra=extra))
    return path


def _in_process(app_file: Path, views: list) -> dict:
    spec = importlib.util.spec_from_file_location(f"inproc_{app_file.stem}", app_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with PipelineHarness(module.app, partitions=PARTITIONS) as h:
        h.send_all(module.views.node.args["topic"], [(k.decode(), v) for k, v in views])
        h.window()
        h.end_of_stream()
        return {
            i: (r.key, r.value) for i, r in distinct_by_id(h.records(f"{module.app.name}-counts")).items()
        }


def test_a_pipeline_app_runs_on_the_broker_as_in_process_and_refuses_a_rename(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    name = topic_name[:40].rstrip("-")
    views = list(pageviews(PageViewSpec(count=600, users=8, pages=5, disorder_ms=300_000)))
    produce_json(broker, f"{name}-views", PARTITIONS, views)
    produce_end_of_stream(broker, f"{name}-views")
    app_file = _write_app(tmp_path / "counts_app.py", name)
    servers = [
        f"--config=systems.kafka.consumer.bootstrap.servers={broker}",
        f"--config=job.logged.store.base.dir={tmp_path / 'state'}",
    ]
    result = run_job(app_file, "--exit-at-end", *servers)
    assert result.returncode == 0, result.stderr[-3000:]
    ran = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, f"{name}-counts")).items()}
    assert len(ran) > 10
    assert ran == _in_process(app_file, views)

    renamed = _write_app(tmp_path / "counts_app.py", name, extra=', name="hourly"')
    refused = run_job(renamed, "--exit-at-end", *servers)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"Error: the plan of pipeline '{name}' differs from the one recorded" in refused.stderr
    assert "give it name='" in refused.stderr
    accepted = run_job(renamed, "--exit-at-end", *servers, "--config=pipeline.plan.accept=true")
    assert accepted.returncode == 0, accepted.stderr[-3000:]


def test_exit_at_end_reads_back_what_the_job_wrote_to_its_intermediate_topic(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    """20,000 views re-keyed through the job's own intermediate topic: with --exit-at-end the
    job stops only once it has read back every re-keyed view (before the fix it stopped when its
    source was read, with 7,065 of 20,000 views counted)."""
    name = topic_name[:40].rstrip("-")
    views = pageviews(PageViewSpec(count=20_000, users=200, pages=50))
    produce_json(broker, f"{name}-views", 4, views)
    produce_end_of_stream(broker, f"{name}-views")
    app = tmp_path / "all_app.py"
    app.write_text(
        "import samzapy\n"
        f"app = samzapy.App('{name}')\n"
        f"(app.stream('{name}-views', timestamp='ts').key_by(lambda v: v['user_id'])\n"
        f"    .window(samzapy.tumbling(hours=1), samzapy.count()).to('{name}-counts'))\n"
    )
    result = run_job(
        app,
        "--exit-at-end",
        f"--config=systems.kafka.consumer.bootstrap.servers={broker}",
        f"--config=job.logged.store.base.dir={tmp_path / 'state'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counted = sum(
        orjson.loads(r.value)["value"] for r in dedup_by_id(consume_all(broker, f"{name}-counts")).values()
    )
    assert counted == 20_000

"""The in-process harness takes a backlog as a job on the broker does (issue 29 item 4).

Page views and profile changes, produced before the job starts with interleaved record
timestamps, joined two ways: directly (views keyed by user) and after a ``key_by`` (the
re-keyed views come back through the job's intermediate topic). ``samzapy run app.py
--exit-at-end`` and the PipelineHarness over the same records (sent with ``run=False``, then
``run()``) give the same joined values: a direct view meets the profile of its time (the
inputs are merged by timestamp), a re-keyed view the last profile (what the job wrote comes
after the backlog). Before, the harness took the records in the order sent, and both joins
saw no profile at all; with the job's records stamped 0, the re-keyed join saw the profile
of its time, unlike the job.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from jobs_support import dedup_by_id  # noqa: E402
from support import consume_all, run_job  # noqa: E402

from samzapy.kafka.admin import TopicAdmin  # noqa: E402
from samzapy.kafka.partitioner import partition_for_key  # noqa: E402
from samzapy.kafka.producer import Producer  # noqa: E402
from samzapy.pipeline.testing import PipelineHarness  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 2
APP = """\
import samzapy

app = samzapy.App("{name}")
profiles = app.table("{name}-profiles")
views = app.stream("{name}-views")
views.join(profiles, lambda v, p: {{**v, "zip": p and p["zip"]}}, kind="left").to("{name}-direct")
(views.key_by(lambda v: v["user"], name="by-user")
      .join(profiles, lambda v, p: {{**v, "zip": p and p["zip"]}}, kind="left", name="rekeyed-join")
      .to("{name}-rekeyed"))
"""


def _backlog() -> tuple[list[Any], list[Any]]:
    """Views and profile changes of three users, timestamps interleaved (a profile change
    5 ms before each view), all views listed before all changes."""
    views, profiles = [], []
    for i in range(30):
        user = f"u{i % 3}"
        profiles.append((user, {"zip": f"{user}-{i}"}, 1_000_000 + 10 * i))
        views.append((user, {"user": user, "n": i}, 1_000_000 + 10 * i + 5))
    return views, profiles


def _produce(broker: str, topic: str, records: list[Any]) -> None:
    with TopicAdmin(broker) as admin:
        admin.ensure_topic(topic, PARTITIONS)
    producer = Producer(broker)
    try:
        for key, value, ts in records:
            raw_key = key.encode()
            partition = partition_for_key(raw_key, PARTITIONS)
            producer.send(topic, raw_key, orjson.dumps(value), partition=partition, timestamp_ms=ts)
        producer.flush()
    finally:
        producer.close()


def _joined(pairs: list[tuple[Any, Any]]) -> list[tuple[str, int, str]]:
    return sorted((key, value["n"], value["zip"]) for key, value in pairs)


def _in_process(app_file: Path, name: str, views: list[Any], profiles: list[Any]) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"inproc_{app_file.stem}", app_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with PipelineHarness(module.app, partitions=PARTITIONS) as h:
        h.send_all(f"{name}-views", views, run=False)
        h.send_all(f"{name}-profiles", profiles, run=False)
        h.run()
        return {kind: _joined(h.outputs(f"{name}-{kind}")) for kind in ("direct", "rekeyed")}


def test_a_join_over_a_backlog_gives_in_process_what_the_job_gives(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    name = topic_name[:40].rstrip("-")
    views, profiles = _backlog()
    _produce(broker, f"{name}-views", views)
    _produce(broker, f"{name}-profiles", profiles)
    app_file = tmp_path / "backlog_app.py"
    app_file.write_text(APP.format(name=name))
    result = run_job(
        app_file,
        "--exit-at-end",
        f"--config=systems.kafka.consumer.bootstrap.servers={broker}",
        f"--config=job.logged.store.base.dir={tmp_path / 'state'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ran = {
        kind: _joined(
            [
                (r.key.decode(), orjson.loads(r.value))
                for r in dedup_by_id(consume_all(broker, f"{name}-{kind}")).values()
            ]
        )
        for kind in ("direct", "rekeyed")
    }
    # A direct view meets the profile of its time; a re-keyed one, the last profile.
    assert ran["direct"] == [
        (f"u{i % 3}", i, f"u{i % 3}-{i}") for i in sorted(range(30), key=lambda i: (i % 3, i))
    ]
    assert ran["rekeyed"] == [
        (f"u{i % 3}", i, f"u{i % 3}-{27 + i % 3}") for i in sorted(range(30), key=lambda i: (i % 3, i))
    ]
    assert _in_process(app_file, name, views, profiles) == ran

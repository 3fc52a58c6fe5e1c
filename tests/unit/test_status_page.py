"""The status page without a broker: the restore left counts every restoring task of the
container and of the job, a one-container job shows no empty table of other containers, and a
peer's link keeps the page's token. The document comes from a real registry and
:class:`StatusReport`; the page is rendered by headless Chromium (skipped without it on a
developer's machine, a failure in CI, where .ci/run installs it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from typing import Any

import pytest

from samzapy.config import Config, parse_job_config
from samzapy.health import ContainerStatus
from samzapy.http_server import BackgroundHttpServer
from samzapy.metrics import MetricsRegistry
from samzapy.status.report import Sample, StatusReport, StatusSampler
from samzapy.status.serving import page

JOB = parse_job_config(
    Config.from_dict({"job.name": "j", "task.class": "mod:Task", "task.inputs": "kafka.in"})
)
TOKEN = "tok/en+1"


class FixedSampler(StatusSampler):
    """The sampler's readings, given (the report is under test, not the sampling thread)."""

    def __init__(self, registry: MetricsRegistry, samples: list[Sample]) -> None:
        super().__init__(registry)
        self._given = samples

    def now(self) -> Sample:
        return self._given[-1]

    def samples(self) -> list[Sample]:
        return self._given[:-1]


def restoring_report(peers: list[dict[str, Any]] | None) -> StatusReport:
    """Container 0 of a job restoring Partition 0 (400 of 1000 records, 100 records/s over the
    last samples) with Partition 1 and Partition 2 still waiting for their turn."""
    registry = MetricsRegistry()
    status = ContainerStatus()
    status.restoring(["Partition 0", "Partition 1", "Partition 2"])
    store = registry.group("store.counts.Partition 0")
    store.gauge("restore-target-records").set(1000)

    def reading(at: float, replayed: int) -> Sample:
        store.gauge("restore-replayed-records").set(replayed)
        return Sample(at, registry.snapshot())

    samples = [reading(100.0, 200), reading(102.0, 400)]
    return StatusReport(
        JOB, "samzapy-container-0", 0, None, status, FixedSampler(registry, samples), peers=lambda: peers
    )


def test_the_restore_left_counts_the_tasks_waiting_for_their_turn() -> None:
    document = restoring_report(None).build()
    # 600 left of Partition 0, and 1000 each (Partition 0's target) for the two not begun
    assert document["restore"] == {
        "tasks_left": 3,
        "records_left": 2600,
        "estimated_tasks": 2,
        "records_per_s": 100.0,
        "eta_s": 26.0,
    }
    assert document["tasks"][0]["restore"]["eta_s"] == 6.0  # the task's own row: its stores only
    assert document["job_restore"]["eta_s"] == 26.0 and "peers" not in document


def test_the_jobs_restore_is_its_slowest_containers() -> None:
    other = {
        "tasks_left": 1,
        "records_left": 9000,
        "estimated_tasks": 0,
        "records_per_s": 300.0,
        "eta_s": 30.0,
    }
    peers = [
        {"name": "samzapy-container-1", "url": "http://h:1", "restore": other},
        {"name": "samzapy-container-2", "url": "http://h:2", "restore": None},  # running
    ]
    document = restoring_report(peers).build()
    assert document["job_restore"] == {
        "containers_restoring": 2,
        "tasks_left": 4,
        "records_left": 11600,
        "estimated_tasks": 2,
        "eta_s": 30.0,
    }
    assert "job_restore" not in restoring_report(peers).build(with_peers=False)  # what a peer asks


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def rendered(document: dict[str, Any]) -> str:
    """The page's DOM in Chromium, served with ``document`` as its status.json and a token."""
    server = BackgroundHttpServer(
        "127.0.0.1", 0, what="test", port_key="test.port", thread_name="t", token=TOKEN
    )
    server.add_route("/", lambda target, headers: (200, "text/html", page()), guarded=True)
    body = json.dumps(document).encode()
    server.add_route("/status.json", lambda target, headers: (200, "application/json", body), guarded=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/?token={TOKEN.replace('/', '%2F').replace('+', '%2B')}"
        command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000"]
        return subprocess.run(
            [*command, "--dump-dom", url], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    finally:
        server.stop()


def test_the_page_shows_the_jobs_restore_and_peer_links_that_keep_the_token() -> None:
    other = {
        "tasks_left": 1,
        "records_left": 9000,
        "estimated_tasks": 0,
        "records_per_s": 300.0,
        "eta_s": 30.0,
    }
    peers = [
        {
            "name": "samzapy-container-1",
            "url": "http://127.0.0.1:1",
            "status": "restoring",
            "tasks": ["Partition 3"],
            "restore": other,
        }
    ]
    dom = rendered(restoring_report(peers).build())
    assert re.search(r'<div id="peers-section">', dom), "the other containers are shown"
    links = re.findall(r'<a href="([^"]+)">http://127\.0\.0\.1:1</a>', dom)
    assert links == ["http://127.0.0.1:1/?token=tok%2Fen%2B1"]
    tile = re.search(r'data-total="restore left, job"><span class="muted">[^<]*</span><b>([^<]*)</b>', dom)
    assert tile is not None and tile.group(1) == "11,600 records · 4 tasks (2 not begun, est.) · ETA 30 s"


def test_a_one_container_job_shows_no_table_of_other_containers() -> None:
    document = restoring_report([]).build()
    dom = rendered(document)
    assert re.search(r'<div id="peers-section" hidden="">', dom), "an empty 'Other containers' table"
    assert 'data-total="restore left, job"' in dom

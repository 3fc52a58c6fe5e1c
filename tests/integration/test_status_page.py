"""The status page of a running job, in a real browser (headless Chromium from Debian's
packages; `.ci/run` installs it when it runs as root): two containers on the dev broker,
container 0 restoring a changelog slowly enough to be watched, then running, then after a
kill -9 of container 1. What the page shows is checked against the job's real figures (the
messages produced, /health), and a screenshot of each stage is saved as a test artifact
(``$SAMZAPY_ARTIFACTS_DIR``, default ``test-artifacts/`` in the repository)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support import (
    committed_changelog,
    counting_job,
    create_topic,
    job_env,
    kill9,
    produce,
    start_job,
    wait_for,
    write_config,
)

from samzapy.kafka.broker import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MESSAGES = {0: 1500, 1: 700}
#: Changelog records container 0 restores for Partition 0, in merged batches of 50k, each
#: slowed by 1.5 s (SAMZAPY_SLOW_AT): about 6 s of restore to watch.
CHANGELOG = 200_000


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run does it as root)")
    return found


def artifacts() -> Path:
    path = Path(os.environ.get("SAMZAPY_ARTIFACTS_DIR", REPO / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def browse(url: str, screenshot: str) -> str:
    """The page's DOM after its script ran once, and a screenshot saved as an artifact."""
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000"]
    dom = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    subprocess.run(
        [*base, "--window-size=1280,1000", f"--screenshot={artifacts() / screenshot}", url],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert (artifacts() / screenshot).stat().st_size > 10_000
    return dom


def rows(dom: str, kind: str) -> dict[str, dict[str, str]]:
    """``<tr data-KIND="name" data-x="..">`` rows of the rendered page -> {name: {x: ..}}."""
    found = {}
    for attributes in re.findall(rf'<tr (data-{kind}="[^"$]*"[^>]*)>', dom):
        values = dict(re.findall(r'data-([a-z]+)="([^"]*)"', attributes))
        found[values[kind]] = values
    return found


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except OSError:  # HTTPError too: the port answers before the page is added to it
        return False
    return True


def test_the_status_page_shows_restoring_running_and_a_killed_peer(tmp_path: Path, broker: str) -> None:
    name = "status-job"
    create_topic(broker, f"{name}-in", 2)
    for partition, count in MESSAGES.items():
        produce(broker, f"{name}-in", [(f"k{i % 40}".encode(), b"1") for i in range(count)], partition)
    ports = [free_port(), free_port()]
    config = write_config(
        tmp_path / "job.properties",
        counting_job(
            name,
            broker,
            tmp_path / "state",
            **{
                "job.container.count": "2",
                "metrics.reporters": "prom",
                "metrics.reporter.prom.class": "prometheus",
            },
        ),
    )
    committed_changelog(broker, config, CHANGELOG)

    def run(container: int, **env: str) -> subprocess.Popen:
        port = str(ports[container])
        return start_job(
            config,
            f"--container-id={container}",
            f"--config=metrics.reporter.prom.port={port}",
            f"--config=job.query.port={port}",
            env=job_env(**env),
            log=tmp_path / f"container-{container}.log",
        )

    pages = [f"http://127.0.0.1:{port}" for port in ports]
    one = run(1)
    zero = run(0, SAMZAPY_SLOW_AT="during-restore:1.5")
    try:
        # restoring: the page shows Partition 0 restoring with its progress
        wait_for(lambda: answers(pages[0] + "/status.json"), 60, what="container 0's status page")
        wait_for(
            lambda: (get_json(pages[0] + "/status.json")["tasks"][0]["restore"] or {}).get("replayed", 0) > 0,
            60,
            what="container 0's restore to make progress",
        )
        dom = browse(pages[0] + "/", "status-1-restoring.png")
        task = rows(dom, "task")["Partition 0"]
        assert task["state"] == "restoring", task
        assert re.search(r"\d+% · [\d,.]+ rec/s · ETA", dom), "no restore progress on the page"
        assert 'data-status="restoring"' in dom

        # running: every message of both partitions processed, the page agrees with /health
        def processed(page: str) -> int:
            return get_json(page + "/status.json")["totals"]["processed"]

        wait_for(
            lambda: processed(pages[0]) == MESSAGES[0] and processed(pages[1]) == MESSAGES[1],
            90,
            what="both containers to process their input",
        )
        wait_for(
            lambda: get_json(pages[0] + "/status.json")["peers"][0].get("status") == "running",
            30,
            what="container 0 to see container 1 running",
        )
        dom = browse(pages[0] + "/", "status-2-running.png")
        health = get_json(pages[0] + "/health")
        assert health["status"] == "running"
        task = rows(dom, "task")["Partition 0"]
        assert task == {"task": "Partition 0", "state": "running", "processed": str(MESSAGES[0])}
        assert health["tasks"]["Partition 0"]["processed"] == MESSAGES[0]
        assert rows(dom, "input")[f"kafka.{name}-in.0"]["lag"] == "0"
        assert rows(dom, "peer")["samzapy-container-1"]["state"] == "running"
        assert "counts " in dom and " kB" in dom  # the store's size on disk
        status = get_json(pages[0] + "/status.json")
        assert status["tasks"][0]["stores"][0]["disk_bytes"] > 0
        assert [p["tasks"] for p in status["peers"]] == [["Partition 1"]]
        assert any(e["text"] == "running" for e in status["events"])

        # container 1 killed: container 0's page shows it unreachable, its own task still runs
        kill9(one)
        dom = browse(pages[0] + "/", "status-3-peer-killed.png")
        assert rows(dom, "peer")["samzapy-container-1"]["state"] == "unreachable"
        assert rows(dom, "task")["Partition 0"]["state"] == "running"
    finally:
        for process in (zero, one):
            kill9(process)

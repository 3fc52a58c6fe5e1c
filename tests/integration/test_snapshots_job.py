"""Snapshots of a running job's stores, through kill -9 rounds, on the directory and the S3
backend (moto's server as a process): after the rounds and a run to the end, each task's
store restored from its newest snapshot equals the one restored from the changelog alone and
the live store, byte for byte; a round that starts with the state directory wiped restores
from a snapshot; every count is exact (no input counted twice or lost)."""

from __future__ import annotations

import json
import random
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import (
    counting_job,
    create_topic,
    job_env,
    kill9,
    metric_sum,
    produce,
    read_metrics,
    read_store,
    run_job,
    start_job,
    write_config,
)

from samzapy.checkpoint import read_checkpoints
from samzapy.config import load_config, parse_job_config
from samzapy.config.model import StoreConfig
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.stores.factory import build_store
from samzapy.stores.snapshots import JobSnapshots
from samzapy.tools.common import load_job
from samzapy.tools.restore import restore_stores

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from s3_server import s3_server  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.crash]

PARTITIONS = 2
KEYS = 300


@contextmanager
def blob_store(backend: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    if backend == "file":
        yield {"blob.store.uri": f"file://{tmp_path / 'blobs'}"}
        return
    pytest.importorskip("moto")
    with s3_server("job-snapshots") as endpoint:
        yield {"blob.store.uri": "s3://job-snapshots/prod", "blob.store.s3.endpoint": endpoint}


def feed(broker: str, topic: str, start: int, count: int) -> None:
    produce(broker, topic, [(b"k%d" % (i % KEYS), b"{}") for i in range(start, start + count)])


def wait_for_snapshots(broker: str, job, tasks: int, timeout: float = 60) -> None:
    """Until every task's checkpoint names a snapshot of its store."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = read_checkpoints(broker, job.checkpoint_topic)
        if sum(1 for cp in found.values() if "counts" in cp.snapshots) >= tasks:
            return
        time.sleep(0.2)
    raise AssertionError("no checkpoint named a snapshot in time")


def restored(job, broker: str, base: Path, partition: int, checkpoint, with_snapshots: bool):
    """Task ``partition``'s ``counts`` restored on an empty machine: contents and the snapshot used."""
    store = job.stores["counts"]
    config = StoreConfig("counts", changelog=store.changelog, object_cache_size=0)
    changelog = KafkaChangelog.read_only(store.changelog.stream, partition, broker, discard_writes=True)
    engine = build_store(
        config,
        partition=partition,
        base_dir=base,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup("s"),
    )
    source = None
    if with_snapshots:
        source = JobSnapshots.for_job(job, MetricsGroup("c")).source(
            job.stores["counts"], partition, checkpoint
        )
    try:
        engine.restore(
            checkpoint.changelog_offsets["counts"],
            trusted_local=False,
            fence=checkpoint.fence_for("counts"),
            snapshots=source,
        )
        with engine.all() as it:
            return dict(it), (source.fetched if source else None)
    finally:
        engine.close()


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_snapshot_restore_equals_changelog_restore_and_live_store_after_kill_9_rounds(
    broker: str, topic_name: str, tmp_path: Path, backend: str
) -> None:
    rng = random.Random(30)
    name = f"snap-{backend}-{topic_name}"[:120]
    state = tmp_path / "state"
    create_topic(broker, f"{name}-in", PARTITIONS)
    with blob_store(backend, tmp_path) as blob_keys:
        props = counting_job(
            name,
            broker,
            state,
            **{"stores.counts.backup.factories": "kafka,blobstore", "task.commit.ms": "300", **blob_keys},
        )
        config = write_config(tmp_path / "job.properties", props)
        job = parse_job_config(load_config(config))
        log = tmp_path / "job.log"
        sent = 0
        for round_ in range(3):
            feed(broker, f"{name}-in", sent, 6000)
            sent += 6000
            process = start_job(config, log=log, env=job_env())
            wait_for_snapshots(broker, job, PARTITIONS)
            time.sleep(rng.uniform(0.0, 1.0))
            kill9(process)
            if round_ == 1:
                shutil.rmtree(state)  # the next round starts on a machine without the stores
        feed(broker, f"{name}-in", sent, 3000)
        sent += 3000
        result = run_job(config, "--exit-at-end", env=job_env())
        assert result.returncode == 0, result.stderr[-4000:]
        text = log.read_text() + result.stderr
        assert "downloaded as the restore's base" in text  # the round after the wipe
        checkpoints = read_checkpoints(broker, job.checkpoint_topic)
        total = 0
        for partition in range(PARTITIONS):
            checkpoint = checkpoints[f"Partition {partition}"]
            live = read_store(state, "counts", bytes, bytes, [partition])
            from_snapshot, used = restored(job, broker, tmp_path / "a", partition, checkpoint, True)
            from_changelog, _ = restored(job, broker, tmp_path / "b", partition, checkpoint, False)
            assert from_snapshot == from_changelog == live
            assert used is not None and checkpoint.snapshots.get("counts")  # a snapshot was the base
            total += sum(json.loads(v) for v in live.values())
        assert total == sent  # exactly once through the kills and the wipe
        # state-storage-tool restore (to the changelog's end) starts from the snapshots too
        report = restore_stores(load_job(str(config)), tmp_path / "tool")
        for part in report.partitions:
            assert part.base_offset is not None and part.records < part.offset + 1  # a tail only
            restored_by_tool = read_store(tmp_path / "tool", "counts", bytes, bytes, [part.partition])
            assert restored_by_tool == read_store(state, "counts", bytes, bytes, [part.partition])


def test_a_blob_store_that_is_down_never_stops_the_job_or_loses_data(
    broker: str, topic_name: str, tmp_path: Path
) -> None:
    name = f"snap-down-{topic_name}"[:120]
    state = tmp_path / "state"
    create_topic(broker, f"{name}-in", PARTITIONS)
    with socket.socket() as s:  # a port nothing listens on: the S3 service is down
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    props = counting_job(
        name,
        broker,
        state,
        **{
            "stores.counts.backup.factories": "kafka,blobstore",
            "task.commit.ms": "300",
            "blob.store.uri": "s3://down/prefix",
            "blob.store.s3.endpoint": down,
        },
    )
    config = write_config(tmp_path / "job.properties", props)
    feed(broker, f"{name}-in", 0, 5000)
    metrics = tmp_path / "metrics.json"
    env = job_env(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics), env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "not uploaded to s3://down/prefix" in result.stderr  # said, and tried again
    assert sum(json.loads(v) for v in read_store(state, "counts", bytes, bytes).values()) == 5000
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "container", "snapshot-upload-failures") >= 1
    assert metric_sum(snapshot, "container", "snapshots-uploaded") == 0
    assert metric_sum(snapshot, "store.counts", "snapshot-lag-records") > 0  # how far behind

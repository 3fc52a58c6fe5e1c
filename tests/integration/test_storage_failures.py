"""Storage failures are not message failures (issue 21, items 1 and 2), end to end: a real job
subprocess, real RocksDB, the real dev broker, with ``task.ignored.exceptions=*`` so that a
storage error taken for a bad message would be skipped.

* a tmpfs holding the stores fills while the job runs: the job stops, no message is skipped,
  and after space returns a rerun gives exact state and changelog;
* a damaged block in the newest local checkpoint (bytes flipped in place in one of its SST
  files, which the live store shares through a hard link): the restore verifies the
  checkpoint, falls back, and the state is exact with nothing skipped.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from support import (
    changelog_counts,
    create_topic,
    metric_sum,
    produce,
    read_counts,
    read_metrics,
    run_job,
    start_job,
    wait_for,
    write_config,
)

from samzapy.checkpoint import read_checkpoints
from samzapy.config import load_config, parse_job_config
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.paths import store_dir

pytestmark = pytest.mark.integration

PARTITIONS = 2


def properties(state: Path, broker: str, name: str) -> dict[str, str]:
    return {
        "job.name": name,
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "300",
        # a storage error taken for a bad message would be skipped: it must not be
        "task.ignored.exceptions": "*",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.object.cache.size": "200",
        "stores.counts.write.batch.size": "100",
        "job.logged.store.base.dir": str(state),
    }


def produce_keyed(broker: str, topic: str, count: int, keys: int, seed: int) -> Counter:
    rng = random.Random(seed)
    keyed = [f"key-{rng.randrange(keys):06d}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


def committed_inputs(broker: str, config: Path) -> int:
    """Messages committed: the sum of the newest checkpoint's input offsets of every task."""
    topic = parse_job_config(load_config(config)).checkpoint_topic
    return sum(sum(c.input_offsets.values()) for c in read_checkpoints(broker, topic).values())


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A 64 MB tmpfs; the test is skipped (saying why) where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if result.returncode != 0:
        reason = result.stderr.strip() or f"exit {result.returncode}"
        print(f"cannot mount a tmpfs ({reason}): the full-disk test needs root")
        pytest.skip(f"cannot mount a tmpfs to fill: {reason}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> Path:
    """Fill ``mount`` to the last byte with one file; returns it (delete it to free the space)."""
    filler = mount / "filler"
    chunk = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as f:  # unbuffered: no write left over for close()
        for size in (len(chunk), 4096, 1):  # down to the last byte
            try:
                while True:
                    f.write(chunk[:size])
            except OSError:
                pass
    return filler


def test_a_full_disk_stops_the_job_with_nothing_skipped_and_a_rerun_is_exact(tmp_path, broker, tmpfs):
    name = "disk-full"
    create_topic(broker, f"{name}-in", PARTITIONS)
    state = tmpfs / "state"
    settings = properties(state, broker, name)
    # RocksDB preallocates each write-ahead log at 1.1 x the write buffer: keep it small so
    # that the stores fit the small disk until the test fills it
    settings["stores.counts.container.write.buffer.size.bytes"] = str(1 << 20)
    config = write_config(tmp_path / "job.properties", settings)
    metrics = tmp_path / "metrics.json"
    expected = produce_keyed(broker, f"{name}-in", 20_000, 5_000, seed=1)
    log = tmp_path / "job.log"
    job = start_job(config, "--metrics-file", str(metrics), log=log)
    try:
        first_batch = lambda: committed_inputs(broker, config) == 20_000  # noqa: E731
        wait_for(first_batch, timeout=90, what="the first batch committed")
        filler = fill(tmpfs)
        expected += produce_keyed(broker, f"{name}-in", 20_000, 5_000, seed=2)
        job.wait(timeout=90)  # stops by itself: the disk is full
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    output = log.read_text()

    assert job.returncode == 1, output[-3000:]
    assert "the disk is full" in output and "store 'counts'" in output, output[-3000:]
    assert metric_sum(read_metrics(metrics), "task.", "skipped-messages") == 0
    assert metric_sum(read_metrics(metrics), "task.", "dead-lettered") == 0
    assert committed_inputs(broker, config) < 40_000  # what failed was not committed

    filler.unlink()  # space returns
    rerun = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert metric_sum(read_metrics(metrics), "task.", "skipped-messages") == 0
    assert read_counts(state) == dict(expected)
    assert changelog_counts(broker, f"{name}-counts-changelog")[0] == dict(expected)


def test_a_damaged_local_checkpoint_falls_back_with_nothing_skipped(tmp_path, broker):
    name = "checkpoint-damage"
    create_topic(broker, f"{name}-in", PARTITIONS)
    state = tmp_path / "state"
    config = write_config(tmp_path / "job.properties", properties(state, broker, name))
    metrics = tmp_path / "metrics.json"
    expected = produce_keyed(broker, f"{name}-in", 30_000, 8_000, seed=3)
    first = run_job(config, "--exit-at-end")
    assert first.returncode == 0, first.stderr[-3000:]

    damaged = []
    for partition in range(PARTITIONS):
        live = store_dir(state, "counts", partition)
        [newest, *_] = LocalCheckpoints(live, f"{name}-counts-changelog", partition).newest_first()
        sst = max(newest.path.glob("*.sst"), key=lambda p: p.stat().st_size)
        assert sst.stat().st_nlink >= 2  # shared with the live store (and older checkpoints)
        size = sst.stat().st_size
        with open(sst, "r+b") as f:  # in place: every hard link sees the flipped bytes
            f.seek(size // 2)
            data = f.read(256)
            f.seek(size // 2)
            f.write(bytes(b ^ 0xFF for b in data))
        damaged.append(sst)
    expected += produce_keyed(broker, f"{name}-in", 10_000, 8_000, seed=4)
    time.sleep(0.1)

    second = run_job(config, "--exit-at-end", "--metrics-file", str(metrics))

    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stderr.count("is damaged, not used") >= PARTITIONS, second.stderr[-3000:]
    snapshot = read_metrics(metrics)
    assert metric_sum(snapshot, "task.", "skipped-messages") == 0
    assert metric_sum(snapshot, "task.", "dead-lettered") == 0
    assert read_counts(state) == dict(expected)
    assert changelog_counts(broker, f"{name}-counts-changelog")[0] == dict(expected)

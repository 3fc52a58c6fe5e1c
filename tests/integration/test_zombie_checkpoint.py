"""A zombie writes nothing after a takeover, and a restart restores the replacement's state
(issue 21 item 6, issue 28 item 3).

Container A is held by a pause point between its fencing check and its checkpoint write
(``SAMZAPY_PAUSE_AT=after-fence-check``: it stops itself with SIGSTOP there, as a GC pause or
``kill -STOP`` would). A replacement with the same container id takes its tasks over and
finishes. A is resumed: before issue 28 its store flush and checkpoint landed after the
takeover (readers ignored them by generation); now its first send checks the fence (the send
lease ran out while it was stopped), so it writes nothing and exits 1 naming the new owner. A
restart must restore the replacement's state, claim a generation nobody had, and end with
exact counts.

Real dev broker, RocksDB stores, job subprocesses.
"""

from __future__ import annotations

import random
import signal
from collections import Counter
from pathlib import Path

import pytest
from support import (
    changelog_counts,
    consume_all,
    create_topic,
    header,
    job_env,
    kill9,
    metric_sum,
    produce,
    read_counts,
    read_metrics,
    run_job,
    start_job,
    wait_for,
    write_config,
)

from samzapy.checkpoint import GENERATION_HEADER, TaskCheckpoint, read_checkpoints
from samzapy.crashpoints import PAUSED_LINE

pytestmark = [pytest.mark.integration, pytest.mark.crash]

PARTITIONS = 2


def properties(state: Path, broker: str, name: str, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "3000",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "job.logged.store.base.dir": str(state),
        **extra,
    }


def produce_keyed(broker: str, topic: str, count: int, keys: int, seed: int) -> Counter:
    rng = random.Random(seed)
    create_topic(broker, topic, PARTITIONS)
    keyed = [f"key-{rng.randrange(keys)}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keyed)))
    return Counter(keyed)


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def checkpoint_records(broker: str, topic: str) -> list[TaskCheckpoint]:
    return [TaskCheckpoint.from_bytes(r.value) for r in consume_all(broker, topic) if r.value is not None]


def test_a_zombie_checkpoint_landing_after_the_takeover_never_wins(tmp_path, broker):
    name = "zombie-lands"
    checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"
    expected = produce_keyed(broker, f"{name}-in", 6_000, 400, seed=21)
    props = properties(tmp_path / "a", broker, name)
    config_a = write_config(tmp_path / "a.properties", props)
    env = job_env(SAMZAPY_PAUSE_AT="after-fence-check")
    zombie = start_job(config_a, env=env, log=tmp_path / "a.log")
    paused = PAUSED_LINE.format(name="after-fence-check")
    try:
        wait_for(
            lambda: paused in (tmp_path / "a.log").read_text() and is_stopped(zombie.pid),
            timeout=120,
            what="container A to stop at its first commit, after the fence check",
        )
        config_b = write_config(
            tmp_path / "b.properties", {**props, "job.logged.store.base.dir": tmp_path / "b"}
        )
        takeover = run_job(config_b, "--exit-at-end")
        assert takeover.returncode == 0, takeover.stderr[-3000:]
        replacement = read_checkpoints(broker, checkpoint_topic)

        zombie.send_signal(signal.SIGCONT)  # A's store flush is its first send: fenced there
        assert zombie.wait(timeout=60) == 1
    finally:
        if zombie.poll() is None:
            zombie.send_signal(signal.SIGCONT)
            kill9(zombie)
    log = (tmp_path / "a.log").read_text()
    owner = replacement["Partition 0"].claimant
    assert f"fenced: tasks taken over by another container: Partition 0 by {owner} (generation 2)" in log

    records = checkpoint_records(broker, checkpoint_topic)
    first_of_replacement = [r.generation for r in records].index(2)
    # the zombie wrote no checkpoint after the takeover ...
    assert {r.generation for r in records[first_of_replacement:]} == {2}
    # ... and the replacement's are every task's checkpoint
    assert read_checkpoints(broker, checkpoint_topic) == replacement
    assert {c.generation for c in replacement.values()} == {2}

    metrics = tmp_path / "metrics.json"
    config_b = tmp_path / "b.properties"
    restart = run_job(config_b, "--exit-at-end", "--metrics-file", str(metrics))

    assert restart.returncode == 0, restart.stderr[-3000:]
    assert read_counts(tmp_path / "b") == dict(expected)
    # nothing was processed again: input resumed at the replacement's offsets
    assert metric_sum(read_metrics(metrics), "task.", "messages-actually-processed") == 0
    claims: dict[tuple[str, int], set[str | None]] = {}
    for record in checkpoint_records(broker, checkpoint_topic):
        claims.setdefault((record.task_name, record.generation), set()).add(record.claimant)
    assert sorted(claims) == [(f"Partition {p}", g) for p in range(PARTITIONS) for g in (1, 2, 3)]
    assert all(len(claimants) == 1 for claimants in claims.values()), claims  # generations unique


def produce_named(broker: str, topic: str, keys: list[str]) -> Counter:
    produce(broker, topic, ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keys)))
    return Counter(keys)


def committed(broker: str, topic: str, generation: int) -> int:
    found = read_checkpoints(broker, topic)
    return sum(o for c in found.values() if c.generation == generation for o in c.input_offsets.values())


def test_a_zombie_resumed_during_a_live_takeover_writes_no_changelog_record(tmp_path, broker):
    name = "zombie-changelog"
    checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"
    changelog = f"{name}-counts-changelog"
    rng = random.Random(22)
    create_topic(broker, f"{name}-in", PARTITIONS)
    expected = produce_named(broker, f"{name}-in", [f"key-{rng.randrange(300)}" for _ in range(4_000)])
    uncoalesced = {"stores.counts.changelog.coalesce": "false", "task.commit.ms": "1000"}
    props = properties(tmp_path / "a", broker, name, **uncoalesced)
    config_a = write_config(tmp_path / "a.properties", props)
    zombie = start_job(config_a, env=job_env(SAMZAPY_PAUSE_AT="after-fence-check"), log=tmp_path / "a.log")
    replacement = None
    try:
        wait_for(
            lambda: is_stopped(zombie.pid), timeout=120, what="container A to stop after its fence check"
        )
        # The replacement takes over and goes further than the zombie got (input B) ...
        expected += produce_named(broker, f"{name}-in", [f"key-{rng.randrange(300)}" for _ in range(4_000)])
        config_b = write_config(
            tmp_path / "b.properties", {**props, "job.logged.store.base.dir": tmp_path / "b"}
        )
        replacement = start_job(config_b, log=tmp_path / "b.log")
        wait_for(lambda: committed(broker, checkpoint_topic, 2) == 8_000, timeout=120, what="the takeover")
        # ... then the zombie resumes: its store flush (the counts of input A alone) is its
        # first send, refused: the fence shows the takeover (before issue 28 these records
        # landed after the replacement's and restores skipped them by generation).
        zombie.send_signal(signal.SIGCONT)
        assert zombie.wait(timeout=60) == 1
        # The replacement writes on and commits.
        expected += produce_named(broker, f"{name}-in", [f"new-{i % 50}" for i in range(500)])
        wait_for(lambda: committed(broker, checkpoint_topic, 2) == 8_500, timeout=120, what="input C")
        replacement.send_signal(signal.SIGTERM)
        assert replacement.wait(timeout=60) == 0
    finally:
        for process in (zombie, replacement):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)
                kill9(process)
    zombie_log = (tmp_path / "a.log").read_text()
    assert "fenced: tasks taken over by another container: Partition 0 by " in zombie_log
    records = consume_all(broker, changelog)
    generations = [int(header(r, GENERATION_HEADER)) for r in records]
    first_of_replacement = generations.index(2)
    assert [g for g in generations[first_of_replacement:] if g == 1] == []  # none of the zombie's
    naive, _ = changelog_counts(broker, changelog)
    assert naive == dict(expected)  # the last value per key is the replacement's
    assert read_counts(tmp_path / "b") == dict(expected)  # the replacement's live stores are right

    fresh = write_config(tmp_path / "c.properties", {**props, "job.logged.store.base.dir": tmp_path / "c"})
    restore = run_job(fresh, "--exit-at-end")

    assert restore.returncode == 0, restore.stderr[-3000:]
    assert read_counts(tmp_path / "c") == dict(expected)  # a full restore equals the replacement
    assert changelog_counts(broker, changelog)[0] == dict(expected)  # the restore rewrote those keys

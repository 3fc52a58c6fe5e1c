"""Zombie rounds, then the checkpoint topic and the changelog compacted as Kafka would: the
state restored is the replacement's, exactly (issue 28 items 1-3).

A round: container A (passthrough) stops itself (SIGSTOP at a pause point: right after a poll
returned records, or at a commit right after its fencing check); a replacement with the same
container id takes its tasks over and reads the input to its end; A is resumed (SIGCONT). A
must stop sending at once and exit 1 with a line naming the tasks and their new owner. Then:

* what A wrote after the takeover, by kind (outputs, changelog records, checkpoints): none;
* the checkpoint topic and the changelog as compaction leaves them
  (:func:`samzapy.kafka.compaction.compact_partitions`) give each task the replacement's
  checkpoint, and a restore from them the exact counts;
* a restart from the (uncompacted) broker restores the same counts and processes nothing.

:func:`zombie_round` is also what ``benchmarks``-style measurements of zombie writes call
(the figures in docs/operations.md). Real dev broker, RocksDB stores, job subprocesses.
"""

from __future__ import annotations

import random
import re
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import (
    consume_all,
    create_topic,
    decode_long,
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

from samzapy.checkpoint import CheckpointFold, TaskCheckpoint
from samzapy.crashpoints import PAUSED_LINE

pytestmark = [pytest.mark.integration, pytest.mark.crash]

PARTITIONS = 2
MESSAGES = 3_000


@dataclass
class Round:
    """What one zombie round left behind."""

    zombie_exit: int
    zombie_log: str
    expected: Counter
    late: dict[str, int] = field(default_factory=dict)  # writes after the takeover, by kind
    topics: dict[str, str] = field(default_factory=dict)
    replacement: dict[str, TaskCheckpoint] = field(default_factory=dict)


def _is_stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def _ends(broker: str, topic: str) -> dict[int, int]:
    ends: dict[int, int] = {}
    for record in consume_all(broker, topic):
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    return ends


def _after(broker: str, topic: str, marks: dict[int, int]) -> list:
    return [r for r in consume_all(broker, topic) if r.offset >= marks.get(r.partition, 0)]


def _properties(tmp_path: Path, broker: str, name: str, member: str) -> Path:
    return write_config(
        tmp_path / f"{member}.properties",
        {
            "job.name": name,
            "task.class": "stateful_tasks:CountAndEmitTask",
            "task.inputs": f"kafka.{name}-in",
            "task.commit.ms": "500",
            "app.output": f"{name}-out",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.changelog": f"kafka.{name}-counts-changelog",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "job.logged.store.base.dir": str(tmp_path / f"state-{member}"),
        },
    )


def zombie_round(broker: str, tmp_path: Path, name: str, pause: str, seed: int) -> Round:
    """One round (module doc); counts what the zombie wrote after the takeover, by kind."""
    topics = {
        "in": f"{name}-in",
        "outputs": f"{name}-out",
        "changelog": f"{name}-counts-changelog",
        "checkpoints": f"__samza_checkpoint_ver_1_for_{name}_1",
    }
    rng = random.Random(seed)
    create_topic(broker, topics["in"], PARTITIONS)
    create_topic(broker, topics["outputs"], PARTITIONS)
    keys = [f"key-{rng.randrange(300)}" for _ in range(MESSAGES)]
    produce(broker, topics["in"], ((k.encode(), f"m{i}".encode()) for i, k in enumerate(keys)))
    log_a = tmp_path / "a.log"
    zombie = start_job(
        _properties(tmp_path, broker, name, "a"), env=job_env(SAMZAPY_PAUSE_AT=pause, MEMBER="a"), log=log_a
    )
    try:
        paused = PAUSED_LINE.format(name=pause)
        wait_for(
            lambda: paused in log_a.read_text(errors="replace") and _is_stopped(zombie.pid),
            timeout=120,
            what=f"container A to stop at {pause}",
        )
        takeover = run_job(_properties(tmp_path, broker, name, "b"), "--exit-at-end", env=job_env(MEMBER="b"))
        assert takeover.returncode == 0, takeover.stderr[-3000:]
        marks = {kind: _ends(broker, topics[kind]) for kind in ("outputs", "changelog", "checkpoints")}
        fold = CheckpointFold()
        for record in consume_all(broker, topics["checkpoints"]):
            fold.add_record(record, topics["checkpoints"])
        zombie.send_signal(signal.SIGCONT)
        code = zombie.wait(timeout=60)
    finally:
        if zombie.poll() is None:
            zombie.send_signal(signal.SIGCONT)
            kill9(zombie)
    result = Round(code, log_a.read_text(errors="replace"), Counter(keys), topics=topics)
    result.replacement = dict(fold.checkpoints)
    # Everything after the marks is the zombie's: the replacement had exited.
    result.late = {kind: len(_after(broker, topics[kind], marks[kind])) for kind in marks}
    return result


class _Changelog:
    """One partition of a changelog as a list of records (gaps where compaction removed some)."""

    def __init__(self, records: list, end: int) -> None:
        self.records, self.end = records, end

    def read(self, start: int, stop: int | None = None):
        chosen = [r for r in self.records if r.offset >= start and (stop is None or r.offset < stop)]
        if chosen:
            yield chosen

    def end_offset(self) -> int:
        return self.end

    def send(self, key: bytes, value: bytes | None) -> None:  # trim writes: not needed here
        pass

    def set_known_offset(self, offset: int | None) -> None:
        pass

    def close_reader(self) -> None:
        pass


def restored_counts(broker: str, topics: dict[str, str], compacted: bool) -> tuple[dict, dict[str, int]]:
    """Each task's checkpoint and the counts a restore to it gives, from the checkpoint topic and
    the changelog as the broker holds them or as compaction would leave them."""
    from samzapy.kafka.compaction import compact_partitions
    from samzapy.metrics import MetricsGroup
    from samzapy.stores.memory import InMemoryStore
    from samzapy.stores.restore import restore

    def read(topic: str) -> list:
        records = consume_all(broker, topic)
        return compact_partitions(records) if compacted else records

    fold = CheckpointFold()
    for record in read(topics["checkpoints"]):
        fold.add_record(record, topics["checkpoints"])
    ends = _ends(broker, topics["changelog"])
    changelog = read(topics["changelog"])
    counts: dict[str, int] = {}
    for task, checkpoint in fold.checkpoints.items():
        partition = int(task.split()[-1])
        store = InMemoryStore()
        records = [r for r in changelog if r.partition == partition]
        k = checkpoint.changelog_offsets.get("counts")
        restore(
            store,
            _Changelog(records, ends.get(partition, 0)),
            k,
            MetricsGroup("s"),
            fence=checkpoint.fence_for("counts"),
        )
        with store.all() as entries:
            counts.update({key.decode(): decode_long(value) for key, value in entries})
    return fold.checkpoints, counts


@pytest.mark.parametrize("pause", ["after-poll", "after-fence-check"])
def test_a_zombie_round_then_compaction_restores_the_replacements_state(tmp_path, broker, pause):
    name = f"zc-{pause}"
    result = zombie_round(broker, tmp_path, name, pause, seed=len(pause))

    assert result.zombie_exit == 1, result.zombie_log[-3000:]
    line = re.search(r"fenced: tasks taken over by another container: (.*)", result.zombie_log)
    assert line is not None, result.zombie_log[-3000:]
    owner = result.replacement["Partition 0"].claimant
    for p in range(PARTITIONS):
        assert f"Partition {p} by {owner} (generation 2)" in line.group(1)
    assert result.late == {"outputs": 0, "changelog": 0, "checkpoints": 0}

    for compacted in (False, True):
        checkpoints, counts = restored_counts(broker, result.topics, compacted)
        assert checkpoints == result.replacement
        assert counts == dict(result.expected)
    outputs = consume_all(broker, result.topics["outputs"])
    assert sum(1 for r in outputs if r.value.startswith(b"b:")) == MESSAGES  # one per message

    metrics = tmp_path / "metrics.json"
    restart = run_job(tmp_path / "b.properties", "--exit-at-end", "--metrics-file", str(metrics))
    assert restart.returncode == 0, restart.stderr[-3000:]
    assert read_counts(tmp_path / "state-b") == dict(result.expected)
    assert metric_sum(read_metrics(metrics), "task.", "messages-actually-processed") == 0

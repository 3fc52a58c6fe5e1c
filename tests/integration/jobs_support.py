"""Helpers for the jobs' integration tests: the ready configs with test topics, crash loops,
dedup by ``samzapy.id``, and the watermark each checkpoint committed."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kafka import TopicPartition
from support import consume_all, header, kill9, run_job, start_job, write_config

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import load_config, parse_job_config
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.operators.key_encoding import decode_ms

CONFIG_DIR = Path(__file__).parents[2] / "config"


def job_config(tmp_path: Path, broker: str, file: str, tag: str, overrides: dict[str, str]) -> Path:
    """The ready config ``config/<file>`` on the test broker, with the job name, the changelogs
    and the state dir made unique by ``tag``, and ``overrides`` (e.g. test topic names)."""
    props = dict(load_config(CONFIG_DIR / file))
    props["job.name"] = f"{props['job.name']}-{tag}"
    for key, value in list(props.items()):
        if key.endswith(".changelog"):
            props[key] = f"{value}-{tag}"
    props["systems.kafka.consumer.bootstrap.servers"] = broker
    props["systems.kafka.producer.bootstrap.servers"] = broker
    props["job.logged.store.base.dir"] = str(tmp_path / f"state-{props['job.name']}")
    props["task.commit.ms"] = "300"
    props["task.window.ms"] = "200"
    props.update(overrides)
    return write_config(tmp_path / f"{props['job.name']}.properties", props)


def run_to_end(config: Path, metrics: Path | None = None) -> None:
    """Run a job with ``--exit-at-end``; fail the test with its log tail if it fails."""
    args = ["--exit-at-end"] + (["--metrics-file", str(metrics)] if metrics else [])
    result = run_job(config, *args)
    assert result.returncode == 0, result.stderr[-4000:]


def crash_rounds(
    configs: Sequence[Path], broker: str, rounds: int, rng: random.Random, log: Path
) -> list[float]:
    """``rounds`` times: start every job, wait until each has committed progress in this run
    (a checkpoint whose input offsets moved past the last one before the run: the ownership
    claim a container writes at start repeats the old offsets and does not count), then
    SIGKILL each after a further random delay of up to a second. A job that has nothing left
    to commit within ``IDLE_ROUND_S`` (its input is used up) is killed idle. Returns the
    delays, for failure messages."""
    delays = []
    for _ in range(rounds):
        before = [checkpoint_history(broker, config) for config in configs]
        jobs = [start_job(config, log=log) for config in configs]
        for config, job, history in zip(configs, jobs, before, strict=True):
            deadline = time.monotonic() + IDLE_ROUND_S
            while time.monotonic() < deadline and not _committed_progress(broker, config, history):
                assert job.poll() is None, f"{config.name} exited with {job.returncode}; see {log}"
                time.sleep(0.1)
            delay = rng.uniform(0.0, 1.0)
            delays.append(round(delay, 2))
            time.sleep(delay)
            kill9(job)
    return delays


#: How long :func:`crash_rounds` waits for a commit with progress before killing a job anyway.
IDLE_ROUND_S = 30.0


def _committed_progress(broker: str, config: Path, history: list[TaskCheckpoint]) -> bool:
    """Whether a checkpoint written after ``history`` moved some task's input offsets."""
    last = {c.task_name: c.input_offsets for c in history}
    new = checkpoint_history(broker, config)[len(history) :]
    return any(c.input_offsets != last.get(c.task_name, {}) for c in new)


class Feeder(threading.Thread):
    """Produces records in ``chunks`` batches, ``pause_s`` apart, so that jobs killed by
    :func:`crash_rounds` are killed mid-stream; then calls ``finish`` (e.g. end-of-stream)."""

    def __init__(
        self,
        produce: Callable[[list], Any],
        records: list,
        chunks: int,
        pause_s: float,
        finish: Callable[[], Any],
    ) -> None:
        super().__init__(daemon=True)
        self._produce, self._records, self._chunks = produce, records, chunks
        self._pause, self._finish = pause_s, finish
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            size = -(-len(self._records) // self._chunks)
            for start in range(0, len(self._records), size):
                self._produce(self._records[start : start + size])
                time.sleep(self._pause)
            self._finish()
        except BaseException as exc:  # noqa: BLE001 - reported by join_checked
            self.error = exc

    def join_checked(self) -> None:
        """Wait for the feeder; re-raise its error."""
        self.join(timeout=120)
        assert not self.is_alive(), "the feeder did not finish"
        if self.error is not None:
            raise self.error


def dedup_by_id(records: list[Any]) -> dict[str, Any]:
    """The first record of each ``samzapy.id``, asserting that every duplicate is
    byte-identical to it (key, value and partition)."""
    first: dict[str, Any] = {}
    for record in records:
        rid = header(record, "samzapy.id")
        assert rid is not None, f"an output without samzapy.id: {record}"
        rid = rid.decode()
        seen = first.get(rid)
        if seen is None:
            first[rid] = record
        else:
            assert (seen.key, seen.value, seen.partition) == (record.key, record.value, record.partition), (
                f"duplicate {rid} differs from its first copy: {seen} vs {record}"
            )
    return first


def checkpoint_history(broker: str, config: Path) -> list[TaskCheckpoint]:
    """Every checkpoint the job wrote, in order."""
    topic = parse_job_config(load_config(config)).checkpoint_topic
    return [TaskCheckpoint.from_bytes(r.value) for r in consume_all(broker, topic) if r.value]


def committed_store_values(
    broker: str, config: Path, store: str, key: bytes, decode: Callable[[bytes], Any] = decode_ms
) -> dict[str, list[Any]]:
    """Per task, the value of ``key`` in ``store`` at each of its checkpoints, in checkpoint
    order: the changelog replayed up to the checkpointed offset (undo records included)."""
    props = load_config(config)
    changelog = props[f"stores.{store}.changelog"].partition(".")[2]
    logs: dict[int, list[Any]] = {}
    consumer = reader_consumer(broker)
    try:
        values: dict[str, list[Any]] = {}
        for checkpoint in checkpoint_history(broker, config):
            offset = checkpoint.changelog_offsets.get(store)
            if offset is None:
                continue
            partition = int(checkpoint.task_name.split()[-1])
            if partition not in logs:
                logs[partition] = [
                    r
                    for batch in read_partition(consumer, TopicPartition(changelog, partition), 0)
                    for r in batch
                ]
            value = None
            for record in logs[partition]:
                if record.offset > offset:
                    break
                if record.key == key:
                    value = record.value
            values.setdefault(checkpoint.task_name, []).append(None if value is None else decode(value))
        return values
    finally:
        consumer.close()


def assert_never_goes_back(values: dict[str, list[Any]]) -> None:
    """Each task's sequence is non-decreasing (``None``: not written yet)."""
    for task, seq in values.items():
        present = [v for v in seq if v is not None]
        assert present == sorted(present), f"{task}: a committed watermark went back: {present}"


def outputs(broker: str, topic: str) -> list[Any]:
    """Every record of ``topic``."""
    return consume_all(broker, topic)

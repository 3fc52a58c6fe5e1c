"""Helpers for tests: job and store configs, job subprocesses, producing and consuming."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kafka import TopicPartition
from rocksdict import AccessType, Options, Rdict

from samzapy.config import Config
from samzapy.config.job import parse_job_config
from samzapy.config.model import StoreConfig
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.metrics import MetricsGroup
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store

TESTS_DIR = Path(__file__).parent
JOB_TIMEOUT_S = 180


def write_config(path: Path, properties: dict[str, Any]) -> Path:
    """Write ``properties`` as a .properties file at ``path``."""
    path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    return path


def counting_job(name: str, broker: str, state: Path, **extra: str) -> dict[str, str]:
    """Properties of a ``CountingTask`` job reading ``<name>-in`` from the start, its store
    ``counts`` logged to ``<name>-changelog``; ``extra`` adds or overrides keys."""
    return {
        "job.name": name,
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "500",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "json",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "json",
        "job.logged.store.base.dir": str(state),
        **extra,
    }


def committed_changelog(broker: str, config: Path, records: int) -> None:
    """Give the ``counts`` store of Partition 0 of ``config``'s job a committed changelog of
    ``records`` records (and its checkpoint), so that the job starts with a restore."""
    from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint
    from samzapy.config import load_config, parse_job_config

    job = parse_job_config(load_config(config))
    changelog = job.stores["counts"].changelog.stream
    create_topic(broker, changelog, 2, compact=True)
    produce(broker, changelog, [(f"old-{i}".encode(), b"1") for i in range(records)], 0)
    create_topic(broker, job.checkpoint_topic, 1, compact=True)
    producer = Producer(broker)
    CheckpointWriter(producer, job.checkpoint_topic).write(
        TaskCheckpoint("Partition 0", {}, {"counts": records - 1})
    )
    producer.flush()
    producer.close()


def job_env(**extra: str) -> dict[str, str]:
    """Environment for job subprocesses: test task modules importable, extras added."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR / "integration"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def job_command(config: Path, *args: str) -> list[str]:
    """The command line that runs ``samzapy run CONFIG ARGS``."""
    return [sys.executable, "-m", "samzapy", "run", str(config), *args]


def loud_lines(output: str) -> list[str]:
    """The WARNING and ERROR log lines of a command's output (a clean run has none: issue 31)."""
    return [line for line in output.splitlines() if re.search(r" (WARNING|ERROR) ", line)]


def run_job(
    config: Path, *args: str, env: dict[str, str] | None = None, timeout: float = JOB_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run a job to completion (normally with --exit-at-end) and return its result."""
    return subprocess.run(
        job_command(config, *args),
        env=env or job_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_job(
    config: Path, *args: str, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen:
    """Start a job in the background; its output goes to ``log`` (or is discarded)."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        job_command(config, *args), env=env or job_env(), stdout=out, stderr=subprocess.STDOUT
    )


def kill9(process: subprocess.Popen) -> None:
    """SIGKILL a job process and reap it."""
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def create_topic(bootstrap: str, topic: str, partitions: int, compact: bool = False) -> None:
    """Create ``topic`` (no error when it exists)."""
    with TopicAdmin(bootstrap) as admin:
        admin.ensure_topic(topic, partitions, compact=compact)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    partition: int | None = None,
) -> int:
    """Produce raw (key, value) records, partitioned by key unless ``partition`` is given."""
    producer = Producer(bootstrap)
    count = 0
    try:
        for key, value in records:
            producer.send(topic, key, value, partition=partition)
            count += 1
        producer.flush()
    finally:
        producer.close()
    return count


def partition_records(bootstrap: str, topic: str, partition: int) -> list[Any]:
    """Every record of one partition of ``topic``, from offset 0 to its true end."""
    consumer = reader_consumer(bootstrap)
    try:
        return [r for batch in read_partition(consumer, TopicPartition(topic, partition), 0) for r in batch]
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str) -> list[Any]:
    """Every record of every partition of ``topic``, to its true end, partition by partition."""
    with TopicAdmin(bootstrap) as admin:
        partitions = admin.partition_count(topic) or 0
    consumer = reader_consumer(bootstrap)
    try:
        records = []
        for p in range(partitions):
            for batch in read_partition(consumer, TopicPartition(topic, p), 0):
                records.extend(batch)
        return records
    finally:
        consumer.close()


def read_store(
    base: Path,
    store: str,
    key_decode: Callable[[bytes], Any] = bytes.decode,
    value_decode: Callable[[bytes], Any] = bytes.decode,
    partitions: Iterable[int] | None = None,
) -> dict[Any, Any]:
    """Every entry of a store on disk (``base/store/Partition_N``, opened read-only): of every
    live partition, or of ``partitions`` (those that exist)."""
    if partitions is None:
        paths = [p for p in sorted((base / store).glob("Partition_*")) if not p.suffix]  # not .checkpoints
    else:
        paths = [base / store / f"Partition_{p}" for p in partitions]
    entries = {}
    for path in paths:
        if not path.exists():
            continue
        db = Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            for key, value in db.items():
                entries[key_decode(key)] = value_decode(value)
        finally:
            db.close()
    return entries


def decode_long(value: bytes) -> int:
    """A ``long`` serde value (8 bytes, big-endian, signed)."""
    return int.from_bytes(value, "big", signed=True)


def read_counts(state: Path, partitions: Iterable[int] | None = None) -> dict[str, int]:
    """The ``counts`` store (string keys, long values) of the tasks under ``state``."""
    return read_store(state, "counts", bytes.decode, decode_long, partitions)


def changelog_counts(bootstrap: str, topic: str) -> tuple[dict[str, int], int]:
    """The last value per key of a ``counts`` changelog (tombstones remove keys), and how many
    records it holds."""
    state: dict[bytes, bytes | None] = {}
    records = consume_all(bootstrap, topic)
    for record in records:
        state[record.key] = record.value
    return {k.decode(): decode_long(v) for k, v in state.items() if v is not None}, len(records)


def header(record: Any, name: str) -> bytes | None:
    """The value of header ``name`` of a consumed record, or ``None``."""
    for key, value in record.headers or []:
        if key == name:
            return value
    return None


def read_metrics(path: Path) -> dict[str, dict[str, Any]]:
    """A metrics snapshot written by ``samzapy run --metrics-file``."""
    return json.loads(path.read_text())


def metric_sum(snapshot: dict[str, dict[str, Any]], prefix: str, name: str) -> int:
    """Sum of metric ``name`` over the groups whose name starts with ``prefix``."""
    return sum(int(g.get(name, 0)) for group, g in snapshot.items() if group.startswith(prefix))


def wait_for(predicate: Any, timeout: float = 60, every: float = 0.2, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def one_store_config(factory: str = "rocksdb", **settings: str) -> StoreConfig:
    """Store ``s`` of a minimal job, changelog ``kafka.s-log``: ``settings`` are its other
    ``stores.s.*`` keys, dots written as underscores (``object_cache_size="8"``)."""
    properties = {
        "job.name": "j",
        "task.class": "m:T",
        "task.inputs": "kafka.in",
        "stores.s.factory": factory,
        "stores.s.changelog": "kafka.s-log",
    }
    properties.update({f"stores.s.{key.replace('_', '.')}": value for key, value in settings.items()})
    return parse_job_config(Config.from_dict(properties)).stores["s"]


def build_one_store(
    config: StoreConfig, base_dir: Path, changelog: Any, serde: Any = None
) -> StorageEngine[Any, Any]:
    """``config``'s store as a job builds it (partition 0 under ``base_dir``), logging to
    ``changelog``; ``serde`` for keys and values (``None``: a bytes store)."""
    return build_store(
        config,
        partition=0,
        base_dir=base_dir,
        key_serde=serde,
        msg_serde=serde,
        changelog=changelog,
        metrics=MetricsGroup("s"),
    )

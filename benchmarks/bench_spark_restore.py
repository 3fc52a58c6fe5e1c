"""Restore benchmark: sequential restore (the stores' own) vs Spark bulk restore, same changelog.

Starts a dev broker on a free port, produces a changelog of N records (default 1,000,000;
~100-byte values, 4 partitions, keys drawn from N/2 so that there are overwrites, 5 %
tombstones), then times:

- sequential: ``StorageEngine.restore(K)`` of each partition into an empty directory, one after
  the other (what a container does for its tasks);
- Spark: :func:`samzapy.spark.restore.bulk.restore_stores` into other directories, ``--jobs``
  times in one session (the first job, and the median of the later ones), with the Spark
  session's start-up timed apart from the restore jobs;

checks that every restore gives the same items, and prints a table (records/s and MB/s of changelog
read; the Spark rows exclude start-up, which is shown on its own line).

Usage: ``python -m benchmarks.bench_spark_restore [--size tiny|small|full] [--count N]
[--master local[*]] [--jobs N]``.
"""

from __future__ import annotations

import logging
import random
import tempfile
import time
from pathlib import Path

from benchmarks._common import Result, arguments, tree_cpu_s
from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint
from samzapy.config import Config, parse_job_config
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.kafka.producer import Producer
from samzapy.metrics import MetricsGroup
from samzapy.stores.factory import build_store
from samzapy.stores.paths import store_dir
from samzapy.stores.rocksdb import RocksDBStore

PARTITIONS = 4
TOPIC = "bench-spark-restore-changelog"


def produce(servers: str, n: int) -> dict[int, int]:
    with TopicAdmin(servers) as admin:
        admin.ensure_topic(TOPIC, PARTITIONS, compact=True)
    producer = Producer(servers, {"linger_ms": 50})
    rng = random.Random(1)
    pad = b"v" * 90
    started = time.perf_counter()
    for i in range(n):
        key = b"key-%09d" % rng.randrange(max(1, n // 2))
        value = None if rng.random() < 0.05 else b"%09d" % i + pad
        producer.send(TOPIC, key, value, partition=key[-1] % PARTITIONS)
    producer.flush()
    offsets = {p: producer.acked_offset(TOPIC, p) for p in range(PARTITIONS)}
    producer.close()
    print(f"produced {n:,} changelog records in {time.perf_counter() - started:.1f}s")
    return offsets


def job_config(servers: str, base: Path) -> Config:
    return Config.from_dict(
        {
            "job.name": "bench-spark-restore",
            "task.class": "samzapy.task:StreamTask",
            "task.inputs": "kafka.unused",
            "systems.kafka.consumer.bootstrap.servers": servers,
            "stores.bench.factory": "rocksdb",
            "stores.bench.changelog": f"kafka.{TOPIC}",
            "job.logged.store.base.dir": str(base),
        }
    )


def sequential(job, servers: str, base: Path, offsets: dict[int, int]) -> tuple[float, int, int]:
    records = size = 0
    started = time.perf_counter()
    for partition, k in offsets.items():
        changelog = KafkaChangelog.read_only(TOPIC, partition, servers)  # no trim: never writes
        store = build_store(
            job.stores["bench"],
            partition=partition,
            base_dir=base,
            key_serde=None,
            msg_serde=None,
            changelog=changelog,
            metrics=MetricsGroup("bench"),
        )
        stats = store.restore(k, trusted_local=False)
        records += stats.restored_messages
        size += stats.restored_bytes
        store.close()
    return time.perf_counter() - started, records, size


def items(path: Path) -> list[tuple[bytes, bytes]]:
    store = RocksDBStore(path)
    try:
        with store.all() as entries:
            return [(e.key, e.value) for e in entries]
    finally:
        store.close()


def row(what: str, seconds: float, records: int, size: int) -> str:
    return (
        f"| {what:<38} | {seconds:8.1f} | {records:>11,} | {records / seconds:>11,.0f} | "
        f"{size / 1e6 / seconds:7.1f} |"
    )


def main() -> None:
    args = arguments(__doc__, count=(20_000, 200_000, 1_000_000), master="", jobs=(2, 3, 5))
    n = args.count
    master = args.master or None
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    from samzapy.spark.restore.bulk import restore_stores
    from samzapy.spark.session import get_spark

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=root / "broker")
        try:
            servers = info.bootstrap_servers
            offsets = produce(servers, n)
            job = parse_job_config(job_config(servers, root / "sequential"))
            producer = Producer(servers)
            writer = CheckpointWriter(producer, job.checkpoint_topic)
            for p, k in offsets.items():
                writer.write(TaskCheckpoint(f"Partition {p}", {}, {"bench": k}))
            producer.flush()
            producer.close()
            cpu = [tree_cpu_s()]
            seq_s, seq_records, seq_bytes = sequential(job, servers, root / "sequential", offsets)
            cpu.append(tree_cpu_s())
            spark, start_s = get_spark(master, "samzapy-bench")
            spark.sparkContext.setLogLevel("ERROR")
            cpu.append(tree_cpu_s())
            jobs = []  # (stats, CPU seconds of the whole tree)
            for run in range(max(2, args.jobs)):
                stats = restore_stores(job, root / f"spark-{run}", master=master)
                cpu.append(tree_cpu_s())
                jobs.append((stats, cpu[-1] - cpu[-2]))
            for p in range(PARTITIONS):
                expected = items(store_dir(root / "sequential", "bench", p))
                for run in range(len(jobs)):
                    got = items(store_dir(root / f"spark-{run}", "bench", p))
                    assert got == expected, f"partition {p} differs after job {run + 1}"
        finally:
            dev_broker.stop(root / "broker")
    cores = spark.sparkContext.defaultParallelism
    result = Result("spark_restore")
    result.note(
        f"spark restore: {n:,} changelog records, {PARTITIONS} partitions; Spark master "
        f"{spark.sparkContext.master} ({cores} cores); identical store contents checked"
    )
    seq_rate = seq_records / seq_s
    limit = ("sequential", seq_rate)
    seq_cpu_us = (cpu[1] - cpu[0]) / max(seq_records, 1) * 1e6
    result.add("sequential restore (x4 partitions)", seq_rate, "rec/s", limit=limit, cpu_us=seq_cpu_us)
    result.add("sequential restore (x4 partitions)", seq_bytes / 1e6 / seq_s, "MB/s")
    for run, (stats, _) in enumerate(jobs, 1):
        work = stats.total_s - stats.spark_start_s
        result.note(
            f"Spark job {run}: {stats.records / work:,.0f} rec/s, {stats.bytes / 1e6 / work:.1f} MB/s "
            f"(Spark job {stats.spark_job_s:.1f} s, ingest {stats.ingest_s:.1f} s)"
        )
    # A job of a million records takes about 2 s on two cores: the median of the later jobs
    # stands for "a warm session", one job alone moves by +-10 % with the machine.
    later = sorted(jobs[1:], key=lambda job: job[0].total_s - job[0].spark_start_s)
    runs = (
        ("Spark bulk restore, 1st job", jobs[0]),
        (f"Spark bulk restore, later jobs (median of {len(later)})", later[len(later) // 2]),
    )
    for label, (stats, cpu_s) in runs:
        work = stats.total_s - stats.spark_start_s
        cpu_us = cpu_s / max(stats.records, 1) * 1e6
        result.add(label, stats.records / work, "rec/s", limit=limit, cpu_us=cpu_us)
        result.add(label, stats.bytes / 1e6 / work, "MB/s")
    first_s, later_s = (job[0].total_s - job[0].spark_start_s for job in (runs[0][1], runs[1][1]))
    result.add("Spark 1st / later job time", first_s / later_s, "x")
    result.add("Spark session start-up with warm-up (not in the rates)", start_s, "s")
    result.write(args.result)


if __name__ == "__main__":
    main()

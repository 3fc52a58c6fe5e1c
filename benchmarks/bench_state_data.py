"""State as data benchmark: read_state and reshard of N changelog records vs the sequential
restore of the same changelogs.

The changelog is bench_spark_restore's (N records, default 1,000,000, ~100-byte values, 4
partitions, keys drawn from N/2, 5 % tombstones), with task checkpoints at its end. Times:

- sequential restore: ``StorageEngine.restore(K)`` of each partition, one after the other;
- read_state: :func:`samzapy.spark.state_data.read.read_state` up to the checkpoints, its read
  pass alone (the executors' read into Spark's cache, what the progress lines show) and the
  call with its typed columns plus a ``count()``;
- reshard 4 -> 8: :func:`samzapy.spark.state_data.reshard.reshard` (read, stage, recreate the changelog,
  write 8 changelog partitions and stores, checkpoints).

Rates are changelog records read per second (and MB/s of key + value bytes); the Spark
session's start-up is not in them.

Usage: ``python -m benchmarks.bench_state_data [--size tiny|small|full] [--count N]``.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from benchmarks._common import Result, arguments, tree_cpu_s
from benchmarks.bench_spark_restore import PARTITIONS, job_config, produce, sequential
from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint
from samzapy.config import parse_job_config
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.producer import Producer


def checkpoint(job, servers: str, offsets: dict[int, int]) -> None:
    producer = Producer(servers)
    writer = CheckpointWriter(producer, job.checkpoint_topic)
    for p, k in offsets.items():
        writer.write(TaskCheckpoint(f"Partition {p}", {}, {"bench": k}))
    producer.flush()
    producer.close()


def main() -> None:
    args = arguments(__doc__, count=(20_000, 200_000, 1_000_000))
    n = args.count
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    from samzapy.spark.session import get_spark
    from samzapy.spark.state_data.read import read_state
    from samzapy.spark.state_data.reshard import reshard

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=root / "broker")
        try:
            servers = info.bootstrap_servers
            offsets = produce(servers, n)
            config = job_config(servers, root / "state")
            job = parse_job_config(config)
            checkpoint(job, servers, offsets)
            cpu = [tree_cpu_s()]
            seq_s, records, size = sequential(job, servers, root / "sequential", offsets)
            cpu.append(tree_cpu_s())
            spark, start_s = get_spark(None, "samzapy-bench-state")
            spark.sparkContext.setLogLevel("ERROR")
            cpu.append(tree_cpu_s())
            started = time.perf_counter()
            frame = read_state(spark, config, "bench", to_checkpoint=True)
            typed_s = time.perf_counter() - started
            keys = frame.count()
            read_s = time.perf_counter() - started
            cpu.append(tree_cpu_s())
            started = time.perf_counter()
            stats = reshard(config, 8, spark=spark, base_dir=root / "resharded")
            reshard_s = time.perf_counter() - started
            cpu.append(tree_cpu_s())
        finally:
            dev_broker.stop(root / "broker")
    result = Result("state_data")
    result.note(
        f"state as data: {n:,} changelog records ({records:,} read by the sequential restore), "
        f"{PARTITIONS} partitions, {keys:,} live keys; Spark {spark.sparkContext.master}; "
        f"read_state's typed frame built in {typed_s:.1f} s (its read pass and type inference)"
    )
    limit = ("sequential", records / seq_s)
    rows = [
        ("sequential restore (x4 partitions)", seq_s, cpu[1] - cpu[0]),
        ("read_state + count()", read_s, cpu[3] - cpu[2]),
        ("reshard 4 -> 8 (read, rewrite, ingest)", reshard_s, cpu[4] - cpu[3]),
    ]
    for label, seconds, cpu_s in rows:
        result.add(label, records / seconds, "rec/s", limit=limit, cpu_us=cpu_s / records * 1e6)
        result.add(label, size / 1e6 / seconds, "MB/s")
    result.note(
        f"reshard: read {stats.read_s:.1f} s, {stats.keys:,} keys written, total {stats.seconds:.1f} s"
    )
    result.add("Spark session start-up (not in the rates)", start_s, "s")
    result.write(args.result)


if __name__ == "__main__":
    main()

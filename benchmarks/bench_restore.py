"""Restore benchmark: a sequential restore of a 1M-record changelog (~100-byte values).

Starts a dev broker on a free port, produces the changelog (1M distinct keys), then times
``StorageEngine.restore(K)`` into an empty RocksDB directory with K the last offset (so no
trim), and stops the broker. Prints records/s and MB/s.

Also reads the same changelog with a raw kafka-python consumer (the limit), and repeats the
restore with half the records to show whether restore time grows linearly.

Usage: ``python -m benchmarks.bench_restore [--size tiny|small|full] [--count N]``.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks._common import Result, arguments, raw_consume
from samzapy.config.model import StoreConfig
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream

TOPIC = "bench-restore-changelog"


def produce(servers: str, n: int, topic: str = TOPIC) -> int:
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=50, batch_size=1 << 20, acks=1)
    value = b"v" * 100
    started = time.perf_counter()
    last = None
    for i in range(n):
        last = producer.send(topic, key=b"key-%09d" % i, value=value, partition=0)
    producer.flush()
    offset = last.get().offset
    producer.close()
    print(f"produced {n:,} records in {time.perf_counter() - started:.1f}s")
    return offset


def restore(servers: str, topic: str, k: int, base: Path, n: int) -> tuple[float, int, int]:
    config = StoreConfig(name="bench", changelog=SystemStream("kafka", topic))
    changelog = KafkaChangelog.read_only(topic, 0, servers)  # no trim: never writes
    store = build_store(
        config,
        partition=0,
        base_dir=base,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup("bench"),
    )
    started = time.perf_counter()
    stats = store.restore(k)
    elapsed = time.perf_counter() - started
    assert store.get(b"key-%09d" % (n - 1)) == b"v" * 100
    store.close()
    return elapsed, stats.restored_messages, stats.restored_bytes


def main() -> None:
    args = arguments(__doc__, count=(20_000, 200_000, 1_000_000))
    n = args.count
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    result = Result("restore")
    with tempfile.TemporaryDirectory() as tmp:
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=Path(tmp) / "broker")
        try:
            servers = info.bootstrap_servers
            k = produce(servers, n)
            half_k = produce(servers, n // 2, TOPIC + "-half")
            raw = raw_consume(servers, TOPIC, 1, c_decoder=False)
            fast = raw_consume(servers, TOPIC, 1, c_decoder=True)
            cpu_started = time.process_time()
            elapsed, records, size = restore(servers, TOPIC, k, Path(tmp) / "state", n)
            restore_cpu_s = time.process_time() - cpu_started
            half_s, _, _ = restore(servers, TOPIC + "-half", half_k, Path(tmp) / "state-half", n // 2)
        finally:
            dev_broker.stop(Path(tmp) / "broker")
    limit = ("raw consume", raw.rate)
    result.add("raw kafka-python consume (changelog)", raw.rate, "rec/s", limit=limit, cpu_us=raw.cpu_us)
    result.add("consume with samzapy's C batch decoder", fast.rate, "rec/s", limit=limit, cpu_us=fast.cpu_us)
    result.add(
        "samzapy sequential restore",
        records / elapsed,
        "rec/s",
        limit=limit,
        cpu_us=restore_cpu_s / max(records, 1) * 1e6,
    )
    result.add("samzapy sequential restore", size / 1e6 / elapsed, "MB/s")
    result.add("restore time, N / (N/2) (2.0 = linear)", elapsed / half_s, "x")
    result.note(
        f"restore: {records:,} records, {size / 1e6:.1f} MB in {elapsed:.1f} s; "
        f"half as many in {half_s:.1f} s"
    )
    result.write(args.result)


if __name__ == "__main__":
    main()

"""Restore benchmark: a sequential restore of a 1M-record changelog (~100-byte values).

Starts a dev broker on a free port, produces the changelog (1M distinct keys), then times
``StorageEngine.restore(K)`` into an empty RocksDB directory with K the last offset (so no
trim), and stops the broker. Prints records/s and MB/s.

Usage: ``.venv/bin/python benchmarks/bench_restore.py [records]`` (default 1,000,000).
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from samzapy.config.model import StoreConfig
from samzapy.kafka import broker as dev_broker
from samzapy.metrics import MetricsGroup
from samzapy.stores.changelog import KafkaChangelog
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream

TOPIC = "bench-restore-changelog"


class NoProducer:
    """Restore to the last offset trims nothing, so nothing is produced."""

    def send(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("unexpected trim write")

    def acked_offset(self, topic: str, partition: int) -> None:
        return None


def produce(servers: str, n: int) -> int:
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=50, batch_size=1 << 20, acks=1)
    value = b"v" * 100
    started = time.perf_counter()
    last = None
    for i in range(n):
        last = producer.send(TOPIC, key=b"key-%09d" % i, value=value, partition=0)
    producer.flush()
    offset = last.get().offset
    producer.close()
    print(f"produced {n:,} records in {time.perf_counter() - started:.1f}s")
    return offset


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=Path(tmp) / "broker")
        try:
            k = produce(info.bootstrap_servers, n)
            metrics = MetricsGroup("bench")
            config = StoreConfig(name="bench", changelog=SystemStream("kafka", TOPIC))
            changelog = KafkaChangelog(TOPIC, 0, NoProducer(), info.bootstrap_servers)
            store = build_store(
                config,
                partition=0,
                base_dir=Path(tmp) / "state",
                key_serde=None,
                msg_serde=None,
                changelog=changelog,
                metrics=metrics,
            )
            started = time.perf_counter()
            stats = store.restore(k)
            elapsed = time.perf_counter() - started
            assert store.get(b"key-%09d" % (n - 1)) == b"v" * 100
            store.close()
        finally:
            dev_broker.stop(Path(tmp) / "broker")
    mb = stats.restored_bytes / 1e6
    print(
        f"restored {stats.restored_messages:,} records, {mb:.1f} MB in {elapsed:.1f}s: "
        f"{stats.restored_messages / elapsed:,.0f} records/s, {mb / elapsed:.1f} MB/s"
    )


if __name__ == "__main__":
    main()

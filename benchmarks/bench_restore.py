"""Restore benchmark: sequential restores of a changelog, in two shapes.

``--shape large`` (the default): one partition of N records of ~100-byte values, as rounds 3
and 4 measured it. ``--shape small-partitions``: four partitions of about 13k small records
each (``--count`` in all), written as a running job writes a window store's changelog (keys
``task|user|window``, short JSON values, every record with the writer's generation header)
and restored as the container restores them: one store after the other, each with its own
reader, with the changelog fence a restarted job's checkpoint carries. That is the shape of
the window count's restore run, where the fixed costs of a partition (a reader, the true
end, opening the store) weigh as much as the records; a regression there (round 5, item 1)
went unseen while only the large shape was measured.

Starts a dev broker on a free port, produces the changelog, then times
``StorageEngine.restore(K)`` into empty RocksDB directories with K the last offset (so no
trim), and stops the broker. Prints records/s and CPU per record of the restore; for the large
shape also a raw kafka-python read of the same changelog (the limit), the same read with the C
decoder, and the restore of half the records (is restore time linear?); for the small shape
the restore time per partition.

Usage: ``python -m benchmarks.bench_restore [--size tiny|small|full] [--count N]
[--shape large|small-partitions] [--small-count N] [--rounds R]``.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks._common import Result, arguments, raw_consume
from samzapy.checkpoint import ChangelogFence, generation_header
from samzapy.config.model import StoreConfig
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream

TOPIC = "bench-restore-changelog"
SHAPES = ("large", "small-partitions")
#: Partitions of the small shape (the window count's four tasks).
SMALL_PARTITIONS = 4


def create_topic(servers: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(topic, partitions, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()


def produce(servers: str, n: int, topic: str = TOPIC) -> int:
    """N distinct keys with 100-byte values in one partition; the last offset."""
    create_topic(servers, topic, 1)
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


def produce_window_changelog(servers: str, n: int, topic: str) -> dict[int, int]:
    """``n`` records over the small shape's partitions, as a window store's changelog.

    Keys ``task|user|window-start`` and values ``{"count": c}``, each record with generation
    1's header (as every changelog record a job writes carries); the last offset of each
    partition.
    """
    create_topic(servers, topic, SMALL_PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=50, batch_size=1 << 20, acks=1)
    headers = generation_header(1)
    last = {}
    for i in range(n):
        partition = i % SMALL_PARTITIONS
        key = b"%d|user-%07d|%d" % (partition, i // SMALL_PARTITIONS, 1_700_000_000_000 + 3_600_000 * (i % 3))
        last[partition] = producer.send(
            topic, key=key, value=b'{"count": %d}' % (i % 977), partition=partition, headers=headers
        )
    producer.flush()
    offsets = {p: future.get().offset for p, future in last.items()}
    producer.close()
    return offsets


def restore(
    servers: str,
    topic: str,
    k: int,
    base: Path,
    *,
    partition: int = 0,
    fence: ChangelogFence | None = None,
    expect: tuple[bytes, bytes] | None = None,
) -> tuple[float, int, int]:
    """Build the store of ``partition`` over its changelog and restore it to ``k``.

    (seconds of the restore, records, bytes); ``expect``: a (key, value) it must then hold.
    """
    config = StoreConfig(name="bench", changelog=SystemStream("kafka", topic))
    changelog = KafkaChangelog.read_only(topic, partition, servers)  # no trim: never writes
    store = build_store(
        config,
        partition=partition,
        base_dir=base,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup(f"bench.{partition}"),
    )
    started = time.perf_counter()
    stats = store.restore(k, fence=fence)
    elapsed = time.perf_counter() - started
    if expect is not None:
        assert store.get(expect[0]) == expect[1], f"restored store lacks {expect[0]!r}"
    store.close()
    return elapsed, stats.restored_messages, stats.restored_bytes


def large(servers: str, n: int, tmp: Path, result: Result) -> None:
    """One partition of ``n`` records (module doc)."""
    k = produce(servers, n)
    half_k = produce(servers, n // 2, TOPIC + "-half")
    raw = raw_consume(servers, TOPIC, 1, c_decoder=False)
    fast = raw_consume(servers, TOPIC, 1, c_decoder=True)
    expect = (b"key-%09d" % (n - 1), b"v" * 100)
    cpu_started = time.process_time()
    elapsed, records, size = restore(servers, TOPIC, k, tmp / "state", expect=expect)
    restore_cpu_s = time.process_time() - cpu_started
    half_s, _, _ = restore(servers, TOPIC + "-half", half_k, tmp / "state-half")
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


def small_partitions(servers: str, n: int, tmp: Path, result: Result, rounds: int) -> None:
    """``n`` records over four partitions, restored one after the other (module doc).

    ``rounds`` times, each into empty directories: one round lasts a fraction of a second.
    """
    topic = TOPIC + "-small"
    ends = produce_window_changelog(servers, n, topic)
    fence = ChangelogFence(start=None, generation=1)  # a restarted job's: every record checked
    seconds = records = size = 0.0
    cpu_started = time.process_time()
    for round_ in range(rounds):
        for partition, k in sorted(ends.items()):
            base = tmp / f"state-small-{round_}"
            elapsed, count, nbytes = restore(servers, topic, k, base, partition=partition, fence=fence)
            seconds, records, size = seconds + elapsed, records + count, size + nbytes
    cpu_s = time.process_time() - cpu_started
    partitions = len(ends) * rounds
    result.add(
        f"restore of {len(ends)} small partitions (window changelog)",
        records / seconds,
        "rec/s",
        cpu_us=cpu_s / max(records, 1) * 1e6,
    )
    result.add("restore time per small partition", seconds / partitions * 1000, "ms")
    result.note(
        f"small partitions: {records / rounds:,.0f} records ({size / rounds / 1e6:.1f} MB) over "
        f"{len(ends)} partitions, restored {rounds} times in {seconds:.2f} s"
    )


def main() -> None:
    args = arguments(
        __doc__,
        count=(20_000, 200_000, 1_000_000),
        shape="large",
        small_count=(8_000, 52_000, 52_000),
        rounds=3,
    )
    if args.shape not in SHAPES:
        raise SystemExit(f"--shape {args.shape!r}: expected one of {', '.join(SHAPES)}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    result = Result("restore" if args.shape == "large" else "restore_small")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            if args.shape == "large":
                large(info.bootstrap_servers, args.count, tmp, result)
            else:
                small_partitions(info.bootstrap_servers, args.small_count, tmp, result, args.rounds)
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

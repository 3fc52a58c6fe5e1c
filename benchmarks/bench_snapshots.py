"""Snapshots benchmark: a store's state restored from a blob-store snapshot vs from its
changelog, the snapshot upload rate, incremental uploads, and the uploads' cost on writes.

Starts a dev broker on a free port, then:

1. **writes** ``--count`` records (``--value-size`` random bytes each, so RocksDB cannot
   compress them away; the full store's keys ``--rewrites`` times each, so that its changelog,
   which the dev broker never compacts, holds that many records per key) into a logged
   RocksDB store through the store stack and the real producer, committing (flush, producer
   flush, local checkpoint) every ``--commit-every`` records; first, on two smaller stores
   written in alternating turns, once without snapshots and once with the snapshot uploader
   queueing each commit's checkpoint to a directory blob store: the write rate with and
   without uploads running beside it;
2. **uploads** the full store's checkpoint as a first snapshot (MB/s), changes 0.1 % of the
   keys and uploads a second one (files and bytes actually sent);
3. **restores** the store on an empty machine from the snapshot (download, checksums,
   RocksDB's full verify, then the changelog after the snapshot) and from the changelog alone,
   and checks both equal the live store.

The blob store is a directory on the local disk: the figures are the code's, not a network's.
Usage: ``python -m benchmarks.bench_snapshots [--size tiny|small|full] [--count N] [--value-size B]``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from pathlib import Path

from benchmarks._common import Result, arguments
from samzapy.config.model import StoreConfig
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.kafka.producer import Producer
from samzapy.metrics import MetricsGroup
from samzapy.stores.blob_store import DirectoryBlobStore
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.paths import checkpoints_dir
from samzapy.stores.snapshot_index import SnapshotLayout
from samzapy.stores.snapshot_restore import SnapshotSource
from samzapy.stores.snapshot_upload import SnapshotMeta, SnapshotSettings, SnapshotUploader, upload_snapshot
from samzapy.streams import SystemStream

BATCH = 1000


def store(base: Path, topic: str, partition: int, producer: Producer | None, servers: str) -> StorageEngine:
    changelog = (
        KafkaChangelog(topic, partition, producer, servers)
        if producer is not None
        else KafkaChangelog.read_only(topic, partition, servers)
    )
    config = StoreConfig("bench", changelog=SystemStream("kafka", topic), object_cache_size=0)
    return build_store(
        config,
        partition=partition,
        base_dir=base,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup(f"store.bench.Partition {partition}"),
    )


def commit(engine: StorageEngine, producer: Producer) -> int:
    engine.flush()
    producer.flush()
    offset = engine.changelog_offset()
    assert offset is not None
    engine.checkpoint(offset)
    return offset


def meta(partition: int, topic: str, offset: int) -> SnapshotMeta:
    return SnapshotMeta(f"Partition {partition}", "bench", topic, partition, offset, 1)


def write(
    engine: StorageEngine,
    producer: Producer,
    keys: range,
    value_size: int,
    commit_every: int,
    uploader: SnapshotUploader | None,
    topic: str,
) -> tuple[float, int]:
    """Write ``keys``; seconds taken (commits included) and the last changelog offset."""
    started = time.perf_counter()
    offset = -1
    for at in range(keys.start, keys.stop, BATCH):
        engine.put_all(
            [(b"key-%09d" % i, os.urandom(value_size)) for i in range(at, min(at + BATCH, keys.stop))]
        )
        if (at + BATCH - keys.start) % commit_every == 0 or at + BATCH >= keys.stop:
            offset = commit(engine, producer)
            if uploader is not None:
                uploader.enqueue(
                    f"Partition {engine.partition}", "bench", engine, meta(engine.partition, topic, offset)
                )
    return time.perf_counter() - started, offset


def digest(engine: StorageEngine) -> tuple[int, str]:
    """(entries, SHA-256 of every key and value in order): equal digests, equal stores."""
    sha = hashlib.sha256()
    count = 0
    with engine.all() as it:
        for key, value in it:
            sha.update(len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
            count += 1
    return count, sha.hexdigest()


def main() -> None:
    args = arguments(
        __doc__,
        count=(20_000, 200_000, 1_000_000),
        value_size=(200, 500, 1000),
        commit_every=(5_000, 50_000, 100_000),
        rewrites=(1, 2, 2),
    )
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    result = Result("snapshots")
    n, size = args.count, args.value_size
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp_dir:
        tmp = Path(tmp_dir)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            topic = "bench-snapshots-changelog"
            with TopicAdmin(servers) as admin:
                admin.ensure_topic(topic, 3, compact=True)
            producer = Producer(servers)
            blob = DirectoryBlobStore(tmp / "blobs")

            # 1. the write rate with and without uploads beside it (partitions 1 and 2), after a
            #    warm-up, in alternating halves so that neither side gets the quieter moments
            warm = store(tmp / "warm", topic, 1, producer, servers)
            write(warm, producer, range(min(n // 10, 20_000)), size, args.commit_every, None, topic)
            warm.close()
            half = n // 8
            uploader = SnapshotUploader(blob, "bench-1", SnapshotSettings(), MetricsGroup("container"))
            plain = store(tmp / "live", topic, 1, producer, servers)
            backed = store(tmp / "live", topic, 2, producer, servers)
            plain_s = backed_s = 0.0
            for at in (0, half):
                plain_s += write(plain, producer, range(at, at + half), size, args.commit_every, None, topic)[
                    0
                ]
                keys = range(at, at + half)
                backed_s += write(backed, producer, keys, size, args.commit_every, uploader, topic)[0]
            half *= 2  # records written by each side
            uploader.wait_idle(600)
            counts = uploader.uploaded.value, uploader.superseded.value, uploader.bytes_uploaded.value
            uploader.close(0)
            plain.close()
            backed.close()

            # 2. the full store, its first and second snapshot (partition 0)
            engine = store(tmp / "live", topic, 0, producer, servers)
            write_s = 0.0
            for _ in range(args.rewrites):  # every key written this often: the changelog is that much larger
                took, offset = write(engine, producer, range(n), size, args.commit_every, None, topic)
                write_s += took
            layout = SnapshotLayout("bench-1", "bench", 0)
            started = time.perf_counter()
            first = upload_snapshot(
                blob, layout, checkpoints_dir(engine.store_dir) / str(offset), meta(0, topic, offset)
            )
            first_s = time.perf_counter() - started
            assert first is not None
            changed = max(n // 1000, 1)
            engine.put_all([(b"key-%09d" % i, os.urandom(size)) for i in range(0, n, n // changed)])
            offset2 = commit(engine, producer)
            started = time.perf_counter()
            second = upload_snapshot(
                blob, layout, checkpoints_dir(engine.store_dir) / str(offset2), meta(0, topic, offset2)
            )
            second_s = time.perf_counter() - started
            assert second is not None
            engine.put_all([(b"key-%09d" % i, os.urandom(size)) for i in range(1, n, n // changed)])
            k = commit(engine, producer)  # a tail after the newest snapshot, replayed by its restore
            live = digest(engine)
            engine.close()

            # 3. restores on empty machines
            fresh = store(tmp / "from-snapshot", topic, 0, None, servers)
            started = time.perf_counter()
            snap_stats = fresh.restore(k, trusted_local=False, snapshots=SnapshotSource(blob, layout))
            snap_s = time.perf_counter() - started
            assert digest(fresh) == live and snap_stats.base_offset == offset2
            fresh.close()
            fresh = store(tmp / "from-changelog", topic, 0, None, servers)
            started = time.perf_counter()
            log_stats = fresh.restore(k, trusted_local=False)
            log_s = time.perf_counter() - started
            assert digest(fresh) == live
            fresh.close()
            producer.close()
        finally:
            dev_broker.stop(tmp / "broker")
    state_mb = first.index.total_bytes / 1e6
    result.add("state size (RocksDB files)", state_mb, "MB")
    result.add("write + commit, no snapshots", half / plain_s, "rec/s")
    result.add(
        "write + commit, uploads beside it", half / backed_s, "rec/s", limit=("no snapshots", half / plain_s)
    )
    result.add("first snapshot upload", state_mb / first_s, "MB/s")
    result.add("second snapshot (0.1 % of keys changed): files sent", second.files_uploaded, "files")
    result.add("second snapshot: files referenced again", second.files_reused, "files")
    result.add("second snapshot: MB sent", second.bytes_uploaded / 1e6, "MB")
    result.add("restore from snapshot", snap_s, "s")
    result.add("restore from snapshot", state_mb / snap_s, "MB/s")
    result.add("restore from changelog", log_s, "s", limit=("restore from snapshot", snap_s))
    result.add("restore from changelog", log_stats.restored_bytes / 1e6 / log_s, "MB/s")
    result.note(
        f"{n:,} keys of {size} B, each written {args.rewrites} times: in {write_s:.1f} s; "
        f"snapshot {state_mb:.0f} MB in "
        f"{len(first.index.files)} files uploaded in {first_s:.1f} s; second snapshot sent "
        f"{second.files_uploaded} of {len(second.index.files)} files ({second.bytes_uploaded / 1e6:.1f} MB) "
        f"in {second_s:.2f} s; restore from snapshot {snap_s:.1f} s (then {snap_stats.restored_messages:,} "
        f"changelog records), from the changelog {log_s:.1f} s ({log_stats.restored_messages:,} records, "
        f"{log_stats.restored_bytes / 1e6:.0f} MB); uploader beside {half:,} writes: "
        f"{counts[0]} snapshots uploaded, {counts[1]} superseded, {counts[2] / 1e6:.0f} MB sent"
    )
    result.write(args.result)


if __name__ == "__main__":
    main()

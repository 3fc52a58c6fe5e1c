"""State larger than the memory the job may use: a stream-table join whose table is several
times its memory limit, run in a Linux memory cgroup.

Starts a dev broker, writes the table's changelog (``--records`` users, ~1 KB incompressible
values each: the state) and ``--views`` page views keyed by random users, then runs the
page-view enrich job (``config/pageview-enrich.properties``: restore the table from its
changelog, then join every view with its user's row) as a child process in a memory cgroup
of ``--limit-mb`` (cgroup v1 ``memory.limit_in_bytes``; the machine has no swap, so going
over means the kernel kills the job). The job's object cache and block cache are small
(``--cache-entries``, ``--block-cache-mb``): reads go to RocksDB's files, through the page
cache the cgroup is charged for.

Prints: the state's size on disk against the limit, the cgroup's peak usage and OOM kills,
the job's peak RSS, restore and processing rates; and checks that every view came out with
exactly its user's row (the run fails otherwise). Without a writable memory cgroup (not
root, cgroup v2 only) it says so and runs without the limit.

Usage: ``python -m benchmarks.bench_larger_than_ram [--size tiny|small|full]
[--records N] [--views N] [--limit-mb MB]``.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from kafka import TopicPartition

from benchmarks._common import Result, arguments, run_child, samzapy_run, write_properties
from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint
from samzapy.config import load_config, parse_job_config
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import read_partition, reader_consumer

PARTITIONS = 4
CONFIG = Path(__file__).resolve().parents[1] / "config" / "pageview-enrich.properties"
CHANGELOG = "ltr-zip-codes-changelog"
STORE = "zip-codes"
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


def row_of(user: str) -> str:
    """The table value of ``user``: ~1 KB, different for every user, hardly compressible."""
    return base64.b64encode(random.Random(user).randbytes(750)).decode()


def user_of(i: int) -> str:
    return f"user-{i:08d}"


def produce_table(servers: str, records: int, checkpoint_topic: str) -> int:
    """The store's changelog, partitioned as the job partitions its input (by user), and
    the job's checkpoints naming its ends (a committed state: restore keeps it all)."""
    with TopicAdmin(servers) as admin:
        admin.ensure_topic(CHANGELOG, PARTITIONS, compact=True)
    producer = Producer(servers, {"linger_ms": 20})
    size = 0
    for i in range(records):
        user = user_of(i)
        value = row_of(user).encode()
        size += len(value)
        producer.send(CHANGELOG, user.encode(), value)
    producer.flush()
    writer = CheckpointWriter(producer, checkpoint_topic)
    for p in range(PARTITIONS):
        writer.write(TaskCheckpoint(f"Partition {p}", {}, {STORE: producer.acked_offset(CHANGELOG, p)}))
    producer.flush()
    producer.close()
    return size


def produce_views(servers: str, views: int, records: int) -> None:
    with TopicAdmin(servers) as admin:
        admin.ensure_topic("ltr-views", PARTITIONS)
        admin.ensure_topic("ltr-profiles", PARTITIONS)
    producer = Producer(servers, {"linger_ms": 20})
    rng = random.Random(5)
    for n in range(views):
        user = user_of(rng.randrange(records))
        producer.send("ltr-views", user.encode(), json.dumps({"user_id": user, "page": f"/p/{n}"}).encode())
    producer.flush()
    producer.close()


class MemoryCgroup:
    """A cgroup v1 memory group with a hard limit; ``prefix`` puts a command into it."""

    def __init__(self, limit_mb: int) -> None:
        self.path = CGROUP_ROOT / f"samzapy-bench-{os.getpid()}"
        self.path.mkdir()
        (self.path / "memory.limit_in_bytes").write_text(str(limit_mb << 20))
        swap_limit = self.path / "memory.memsw.limit_in_bytes"
        if swap_limit.exists():
            swap_limit.write_text(str(limit_mb << 20))

    def prefix(self) -> list[str]:
        """``sh -c`` that moves itself into the group, then ``exec``s the command."""
        return ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh"]

    def peak_mb(self) -> float:
        return int((self.path / "memory.max_usage_in_bytes").read_text()) / (1 << 20)

    def oom_kills(self) -> int:
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def remove(self) -> None:
        self.path.rmdir()


def open_cgroup(limit_mb: int) -> tuple[MemoryCgroup | None, str]:
    try:
        return MemoryCgroup(limit_mb), ""
    except OSError as exc:
        return (
            None,
            f"no memory limit applied: cannot create a cgroup v1 memory group under {CGROUP_ROOT} ({exc})",
        )


def check_outputs(servers: str, views: int) -> int:
    """Every enriched view carries exactly its user's row; returns how many were read."""
    consumer = reader_consumer(servers)
    seen = 0
    try:
        for p in range(PARTITIONS):
            for batch in read_partition(consumer, TopicPartition("ltr-enriched", p), 0):
                for record in batch:
                    view = json.loads(record.value)
                    if view["zip"] != row_of(view["user_id"]):
                        raise SystemExit(
                            f"wrong row for {view['user_id']} at partition {p} offset {record.offset}"
                        )
                    seen += 1
    finally:
        consumer.close()
    if seen != views:
        raise SystemExit(f"{seen:,} enriched views for {views:,} views")
    return seen


def main() -> None:
    args = arguments(
        __doc__,
        records=(20_000, 1_000_000, 3_000_000),
        views=(10_000, 200_000, 500_000),
        limit_mb=(256, 256, 384),
        cache_entries=1_000,
        block_cache_mb=16,
    )
    result = Result("larger_than_ram")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        cgroup, why = open_cgroup(args.limit_mb)
        try:
            servers = info.bootstrap_servers
            props = dict(load_config(CONFIG))
            state_dir = tmp / "state"
            props.update(
                {
                    "job.name": "larger-than-ram",
                    "task.inputs": "kafka.ltr-profiles,kafka.ltr-views",
                    "systems.kafka.streams.ltr-profiles.samza.bootstrap": "true",
                    "join.table.stream": "ltr-profiles",
                    "join.output.stream": "kafka.ltr-enriched",
                    "systems.kafka.consumer.bootstrap.servers": servers,
                    "systems.kafka.producer.bootstrap.servers": servers,
                    "job.logged.store.base.dir": str(state_dir),
                    "stores.zip-codes.changelog": f"kafka.{CHANGELOG}",
                    "stores.zip-codes.object.cache.size": str(args.cache_entries),
                    "stores.zip-codes.container.cache.size.bytes": str(args.block_cache_mb << 20),
                    "stores.zip-codes.container.write.buffer.size.bytes": str(16 << 20),
                }
            )
            for key in [k for k in props if k.startswith("systems.kafka.streams.profiles.")]:
                del props[key]
            config = write_properties(tmp / "job.properties", props)
            started = time.perf_counter()
            checkpoint_topic = parse_job_config(load_config(config)).checkpoint_topic
            table_bytes = produce_table(servers, args.records, checkpoint_topic)
            produce_views(servers, args.views, args.records)
            produced_s = time.perf_counter() - started
            result.note(f"produced {args.records:,} rows and {args.views:,} views in {produced_s:.1f} s")
            metrics = tmp / "metrics.json"
            command = samzapy_run(config, "--metrics-file", str(metrics))
            run = run_child((cgroup.prefix() if cgroup else []) + command, timeout_s=1800)
            checked = check_outputs(servers, args.views)
            on_disk = sum(
                f.stat().st_size for f in state_dir.rglob("*") if f.is_file() and "checkpoints" not in str(f)
            )
            snapshot = json.loads(metrics.read_text())
        finally:
            dev_broker.stop(tmp / "broker")
            if cgroup is not None:
                peak, kills = cgroup.peak_mb(), cgroup.oom_kills()
                cgroup.remove()
        stores = [g for name, g in snapshot.items() if name.startswith("store.")]
        restored = sum(g.get("restored-messages", 0) for g in stores)
        restore_s = sum(g.get("restore-time", 0) for g in stores) / 1000
        limit = ("memory limit", float(args.limit_mb)) if cgroup else None
        result.add("state on disk (RocksDB files)", on_disk / (1 << 20), "MB", limit=limit)
        result.add("changelog (table) size", table_bytes / (1 << 20), "MB", limit=limit)
        if cgroup is not None:
            result.add("memory limit (cgroup)", args.limit_mb, "MB", limit=limit)
            result.add("cgroup peak usage (RSS + page cache)", peak, "MB", limit=limit)
            result.add("OOM kills", kills, "")
        else:
            result.note(why)
        result.add("job peak RSS", run.rss_mb, "MB", limit=limit, rss_mb=run.rss_mb)
        result.add("views joined, each checked against its row", checked, "views")
        result.add("restore of the table, in the limit", restored / max(restore_s, 1e-3), "rec/s")
        result.add(
            "join after restore, in the limit",
            args.views / run.busy_s,
            "views/s",
            cpu_us=run.busy_cpu_s / args.views * 1e6,
        )
        result.note(
            f"{args.records:,} rows restored ({restored:,} per the metrics), {args.views:,} views; "
            f"object cache {args.cache_entries:,} entries, block cache {args.block_cache_mb} MB"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    result.write(args.result)


if __name__ == "__main__":
    main()

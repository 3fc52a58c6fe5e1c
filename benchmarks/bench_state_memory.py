"""Memory as state grows: the window count's peak RSS with N and 10 N keys, fixed caches.

Starts its own dev broker and, for N and 10 N users, produces the **same number** of page
views (10 N, so the input and the client buffers it fills are the same) over three hours of
event time, and runs the pageview-counter job (``config/pageview-counter.properties``) to the
end of its input with one window of a day (``--window-ms``): the state at the end is one
window per user seen, about 10x larger in the second run. Every memory bound is fixed and
the same in both runs: the object cache (``--cache`` entries), RocksDB's block cache and
write buffer (``--block-cache-mb``, ``--write-buffer-mb``), the producer buffer, changelog
coalescing's pending-key cap, the window operator's emit batch.

What it shows: whether the job's peak RSS is bounded by that configuration or grows with
the state, and why the rate changes. Rows: peak RSS, processing rate, windows emitted, the
job's CPU time and its changelog records per window, per run; the RSS ratio of the two runs,
and the CPU split into a cost per view and a cost per window (the two runs have the same
views and differ in windows: solving ``cpu = views * a + windows * b`` for both gives ``a``
and ``b``; start-up is in ``a``).

    python -m benchmarks.bench_state_memory --size full      # 100k vs 1M keys, 1M views
    python -m benchmarks.bench_state_memory --users 20000 --block-cache-mb 100 --write-buffer-mb 32
    python -m benchmarks.bench_state_memory --memory-budget-mb 16   # job.rocksdb.memory.bytes
    python -m benchmarks.bench_state_memory --producer-buffer-mb 32  # producer buffer.memory
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks._common import (
    ROOT,
    Result,
    arguments,
    count_records,
    processed_messages,
    run_child,
    samzapy_run,
    write_properties,
)
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

CONFIG = ROOT / "config" / "pageview-counter.properties"
PARTITIONS = 4


def make_topic(servers: str, topic: str, views: int, users: int) -> None:
    """``views`` views over ``users`` users, keyed by user, and an end-of-stream marker."""
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    spec = PageViewSpec(count=views, users=users, pages=1000, disorder_ms=60_000)
    produce_json(servers, topic, PARTITIONS, ((v["user_id"].encode(), v) for _, v in pageviews(spec)))
    produce_end_of_stream(servers, topic)


def run_counter(
    tmp: Path, servers: str, views: int, users: int, args: argparse.Namespace, result: Result
) -> tuple[float, float, int]:
    """Count ``views`` views over ``users`` keys; add the run's rows; return its peak RSS,
    CPU seconds and windows."""
    tag = f"u{users}"
    topic = f"views-{tag}"
    started = time.perf_counter()
    make_topic(servers, topic, views, users)
    produced_s = time.perf_counter() - started
    props = dict(load_config(CONFIG))
    props.update(
        {
            "job.name": f"memory-{tag}",
            "task.inputs": f"kafka.{topic}",
            "watermark.upstream.tasks": "0",
            "window.late.stream": "",
            "window.output.stream": f"kafka.counts-{tag}",
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.producer.bootstrap.servers": servers,
            "job.logged.store.base.dir": f"{tmp}/state-{tag}",
            "task.commit.ms": "10000",
            "stores.pageview-counts.changelog": f"kafka.counts-changelog-{tag}",
            "window.size.ms": str(args.window_ms),
            "stores.pageview-counts.object.cache.size": str(args.cache),
            "stores.pageview-counts.container.cache.size.bytes": str(args.block_cache_mb << 20),
            "stores.pageview-counts.container.write.buffer.size.bytes": str(args.write_buffer_mb << 20),
        }
    )
    if args.memory_budget_mb:  # one budget for the process's RocksDB instead of the store's own
        props["job.rocksdb.memory.bytes"] = str(args.memory_budget_mb << 20)
    if args.producer_buffer_mb:  # what the producer holds unacknowledged (its default otherwise)
        props["systems.kafka.producer.buffer.memory"] = str(args.producer_buffer_mb << 20)
    config = write_properties(tmp / f"memory-{tag}.properties", props)
    metrics = tmp / f"metrics-{tag}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the job, reaped by run_child
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    snapshot = json.loads(metrics.read_text())
    processed = processed_messages(snapshot)
    windows = count_records(servers, f"counts-{tag}")
    changelog = count_records(servers, f"counts-changelog-{tag}")
    result.add(f"window count, {users:,} keys: peak RSS", run.rss_mb, "MB", rss_mb=run.rss_mb)
    result.add(
        f"window count, {users:,} keys: processing",
        processed / run.busy_s,
        "msg/s",
        cpu_us=run.busy_cpu_s / max(processed, 1) * 1e6,
    )
    result.add(f"window count, {users:,} keys: windows (state at the end)", windows, "windows")
    result.add(f"window count, {users:,} keys: job CPU", cpu_s, "s")
    # Puts and tombstones the windows cost in the changelog (coalescing drops both for a
    # window created and closed before its put was sent).
    result.add(f"window count, {users:,} keys: changelog records per window", changelog / max(windows, 1), "")
    result.note(
        f"{users:,} keys: {processed:,} messages (produced in {produced_s:.1f} s), {windows:,} "
        f"windows; object cache {args.cache:,} entries, block cache {args.block_cache_mb} MB, "
        f"write buffer {args.write_buffer_mb} MB"
        + (f", process budget {args.memory_budget_mb} MB" if args.memory_budget_mb else "")
        + f"; peak RSS {run.rss_mb:.0f} MB"
    )
    return run.rss_mb, cpu_s, windows


def add_cost_split(
    result: Result, views: int, small: tuple[float, float, int], large: tuple[float, float, int]
) -> None:
    """The CPU per view and per window from two runs over the same views (module doc)."""
    (_, cpu_small, windows_small), (_, cpu_large, windows_large) = small, large
    if windows_large == windows_small:
        result.note("same number of windows in both runs: no per-window cost")
        return
    per_window = (cpu_large - cpu_small) / (windows_large - windows_small)
    per_view = (cpu_small - windows_small * per_window) / views
    result.add("CPU per window (create, log, close, emit)", per_window * 1e6, "us")
    result.add("CPU per view (besides its window's share)", per_view * 1e6, "us")


def main() -> None:
    args = arguments(
        __doc__,
        users=(10_000, 50_000, 100_000),
        cache=10_000,
        block_cache_mb=8,
        write_buffer_mb=8,
        window_ms=86_400_000,
        memory_budget_mb=0,
        producer_buffer_mb=0,
    )
    result = Result("state_memory")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            views = 10 * args.users
            small = run_counter(tmp, servers, views, args.users, args, result)
            large = run_counter(tmp, servers, views, 10 * args.users, args, result)
            result.add("peak RSS, 10x keys / 1x keys", large[0] / small[0], "x")
            add_cost_split(result, views, small, large)
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

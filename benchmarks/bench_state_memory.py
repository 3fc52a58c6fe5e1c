"""Memory as state grows: the window count's peak RSS with N and 10 N keys, fixed caches.

Starts its own dev broker and, for each key count, produces one page view per user (so every
view opens a window of its own: the state is one window per user, two RocksDB entries each)
over three hours of event time, then runs the pageview-counter job
(``config/pageview-counter.properties``) to the end of its input with the same, fixed
object cache (``--cache``, entries) and RocksDB settings. The second run holds 10x the keys
of the first, and more state than the object cache holds at every point.

What it shows: whether the job's peak RSS is bounded by its configuration (object cache,
RocksDB block cache and write buffers, producer buffer, changelog coalescing's pending-key
cap, the window operator's emit batch) or grows with the state. Rows: peak RSS (``wait4``)
and processing rate per run, and the RSS ratio of the two runs.

    python -m benchmarks.bench_state_memory --size full      # 100k vs 1M keys
    python -m benchmarks.bench_state_memory --users 20000 --cache 5000
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks._common import ROOT, Result, arguments, run_child, samzapy_run, write_properties
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

CONFIG = ROOT / "config" / "pageview-counter.properties"
PARTITIONS = 4


def make_topic(servers: str, topic: str, users: int) -> None:
    """``users`` views, one per user, keyed by user, and an end-of-stream marker."""
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    spec = PageViewSpec(count=users, users=users, pages=1000, disorder_ms=60_000)
    produce_json(servers, topic, PARTITIONS, ((v["user_id"].encode(), v) for _, v in pageviews(spec)))
    produce_end_of_stream(servers, topic)


def run_counter(tmp: Path, servers: str, users: int, cache: int, result: Result) -> float:
    """Count ``users`` views over ``users`` keys; add the run's rows; return its peak RSS."""
    tag = f"u{users}"
    topic = f"views-{tag}"
    started = time.perf_counter()
    make_topic(servers, topic, users)
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
            "stores.pageview-counts.object.cache.size": str(cache),
        }
    )
    config = write_properties(tmp / f"memory-{tag}.properties", props)
    metrics = tmp / f"metrics-{tag}.json"
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    snapshot = json.loads(metrics.read_text())
    processed = sum(
        g.get("messages-actually-processed", 0) for n, g in snapshot.items() if n.startswith("task.")
    )
    result.add(f"window count, {users:,} keys: peak RSS", run.rss_mb, "MB", rss_mb=run.rss_mb)
    result.add(f"window count, {users:,} keys: processing", processed / run.busy_s, "msg/s")
    result.note(
        f"{users:,} keys: {processed:,} messages (produced in {produced_s:.1f} s), "
        f"object cache {cache:,} entries, peak RSS {run.rss_mb:.0f} MB"
    )
    return run.rss_mb


def main() -> None:
    args = arguments(__doc__, users=(10_000, 50_000, 100_000), cache=10_000)
    result = Result("state_memory")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            small = run_counter(tmp, servers, args.users, args.cache, result)
            large = run_counter(tmp, servers, 10 * args.users, args.cache, result)
            result.add("peak RSS, 10x keys / 1x keys", large / small, "x")
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

"""The seed's naive window count at two sizes: does its rate hold as closed windows pile up?

:class:`benchmarks.naive_window_task.NaiveWindowCount` is the window count as Samza's state
docs describe it: a read-increment-write per view in a plain RocksDB store, and a ``window()``
(every second) that scans ``all()`` from the first key, emits the windows the event time has
passed and deletes them. Deleted windows are the smallest keys, so each later scan starts over
their tombstones. The benchmark runs it on 200k views over 20k users and on 1M views over
100k users (same three hours of event time: five times the windows, five times the
tombstones), twice each, alternating, and reports the rates, CPU per message and the ratio of
the large run's rate to the small one's (1.0 = no degradation).

    python -m benchmarks.bench_naive_window --size small
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks._common import (
    Result,
    arguments,
    count_records,
    processed_messages,
    run_child,
    samzapy_run,
    write_properties,
)
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

PARTITIONS = 4


def make_topic(servers: str, topic: str, count: int, users: int) -> None:
    spec = PageViewSpec(count=count, users=users, pages=1000, disorder_ms=60_000)
    produce_json(servers, topic, PARTITIONS, ((v["user_id"].encode(), v) for _, v in pageviews(spec)))
    produce_end_of_stream(servers, topic)


def job_config(tmp: Path, servers: str, topic: str, tag: str, scan: str = "to-first-open") -> Path:
    """The naive job on ``topic``, as a user following the docs would configure it."""
    return write_properties(
        tmp / f"naive-{tag}.properties",
        {
            "job.name": f"naive-window-{tag}",
            "task.class": "benchmarks.naive_window_task:NaiveWindowCount",
            "task.inputs": f"kafka.{topic}",
            "task.window.ms": "1000",
            "task.commit.ms": "10000",
            "app.output": f"naive-counts-{tag}",
            "app.scan": scan,
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.producer.bootstrap.servers": servers,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.changelog": f"kafka.naive-counts-changelog-{tag}",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "job.logged.store.base.dir": f"{tmp}/state-{tag}",
        },
    )


def run_job(
    tmp: Path, servers: str, topic: str, tag: str, scan: str = "to-first-open"
) -> tuple[float, float, float, int, float]:
    """(msg/s, CPU us per message, peak RSS MB, windows emitted, seconds in ``window()``) of
    one run to the end."""
    config = job_config(tmp, servers, topic, tag, scan)
    metrics = tmp / f"metrics-{tag}.json"
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    snapshot = json.loads(metrics.read_text())
    processed = processed_messages(snapshot)
    sent = count_records(servers, f"naive-counts-{tag}")
    logged = count_records(servers, f"naive-counts-changelog-{tag}")
    per_view = logged / max(processed, 1)
    print(f"{tag}: {processed:,} views, {logged:,} changelog records ({per_view:.2f} a view)", flush=True)
    window_s = sum(g.get("window-ns", 0) for g in snapshot.values()) / 1e9
    return processed / run.busy_s, run.busy_cpu_s / max(processed, 1) * 1e6, run.rss_mb, sent, window_s


def main() -> None:
    args = arguments(
        __doc__,
        small=(20_000, 200_000, 200_000),
        large=(100_000, 1_000_000, 1_000_000),
        rounds=2,
    )
    result = Result("naive_window")
    sizes = {"small": (args.small, args.small // 10), "large": (args.large, args.large // 10)}
    runs: dict[str, list[tuple[float, float, float, int, float]]] = {"small": [], "large": []}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            for size, (count, users) in sizes.items():
                started = time.perf_counter()
                make_topic(servers, f"naive-views-{size}", count, users)
                result.note(
                    f"{size}: {count:,} views over {users:,} users, produced in "
                    f"{time.perf_counter() - started:.1f} s"
                )
            for round_ in range(args.rounds):
                for size in sizes:
                    runs[size].append(run_job(tmp, servers, f"naive-views-{size}", f"{size}{round_}"))
        finally:
            dev_broker.stop(tmp / "broker")
    means = {}
    for size, figures in runs.items():
        count = sizes[size][0]
        rate = sum(f[0] for f in figures) / len(figures)
        cpu = sum(f[1] for f in figures) / len(figures)
        means[size] = (rate, cpu)
        result.add(
            f"naive window count, {count:,} views",
            rate,
            "msg/s",
            rss_mb=max(f[2] for f in figures),
            cpu_us=cpu,
        )
        each = ", ".join(
            f"{f[0]:,.0f} msg/s {f[1]:.1f} us ({f[3]:,} windows emitted, {f[4]:.2f} s in window())"
            for f in figures
        )
        result.note(f"naive {size}, rounds: {each}")
    result.add("naive window count, large / small rate", means["large"][0] / means["small"][0], "x")
    cpu_ratio = means["large"][1] / means["small"][1]
    result.add("naive window count, large / small CPU per message", cpu_ratio, "x")
    result.write(args.result)


if __name__ == "__main__":
    main()

"""Replay throughput: the window-count job replayed in Spark vs run in streaming, same input.

Starts its own dev broker, produces N page views keyed by user (4 partitions, U users, three
hours of event time) and an end-of-stream marker, then over that same input topic:

- streaming: the pageview-counter job (``config/pageview-counter.properties``, tumbling hour
  windows, ``watermark.upstream.tasks=0``) with ``samzapy run --exit-at-end``: outputs and
  changelog writes to Kafka, commits; timed from its first task starting to exit (process
  start-up shown apart: the "starts at offset" log line marks the first task ready);
- replay: :func:`samzapy.spark.replay.replay` of the same job under another job name (own
  output topic, changelog and checkpoint topic), Kafka output: outputs to Kafka, final stores
  to the changelog, SST-ingested into a state dir, checkpoint written. The Spark session's
  start-up is timed apart; the replay is run ``--runs`` times (each into a fresh deployment)
  because the first Spark job of a session also pays for starting Python workers and JIT.

The replay's outputs are checked against the streaming run's ((samzapy.id, value) multisets)
before the table is printed: msg/s of each, and replay/streaming ratios.

    .venv/bin/python benchmarks/bench_replay.py                     # 300k views, 10k users
    .venv/bin/python benchmarks/bench_replay.py --count 1000000 --users 100000 --master 'local[4]'
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks._common import processed_messages
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

CONFIG = Path(__file__).parents[1] / "config" / "pageview-counter.properties"
INPUT = "bench-replay-views"


def run_timed(command: list[str]) -> tuple[float, float]:
    """Run a job command; (seconds until its first task starts reading, total seconds)."""
    started = time.perf_counter()
    ready = None
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        for line in process.stderr:
            if ready is None and "starts at offset" in line:
                ready = time.perf_counter() - started
            if "ERROR" in line or "Traceback" in line:
                sys.stderr.write(line)
        code = process.wait()
    if code != 0:
        raise SystemExit(f"the streaming job failed with exit code {code}")
    return ready or 0.0, time.perf_counter() - started


def write_config(tmp: Path, name: str, servers: str) -> Path:
    """The counter's config for deployment ``name`` (its own outputs, changelog, state)."""
    props = dict(load_config(CONFIG))
    props.update(
        {
            "job.name": name,
            "task.inputs": f"kafka.{INPUT}",
            "watermark.upstream.tasks": "0",
            "window.late.stream": "",
            "window.output.stream": f"kafka.{name}-counts",
            "stores.pageview-counts.changelog": f"kafka.{name}-changelog",
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.producer.bootstrap.servers": servers,
            "job.logged.store.base.dir": str(tmp / f"state-{name}"),
            "task.commit.ms": "10000",
        }
    )
    path = tmp / f"{name}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def outputs(servers: str, topic: str) -> Counter:
    """(samzapy.id, value) of every record of ``topic``."""
    from kafka import TopicPartition

    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.reading import read_partition, reader_consumer

    with TopicAdmin(servers) as admin:
        partitions = admin.partition_count(topic) or 0
    consumer = reader_consumer(servers)
    found: Counter = Counter()
    try:
        for p in range(partitions):
            for batch in read_partition(consumer, TopicPartition(topic, p), 0):
                for r in batch:
                    rid = next((v for k, v in r.headers or [] if k == "samzapy.id"), None)
                    found[(rid, r.value)] += 1
    finally:
        consumer.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2, help="replays, each into a fresh deployment")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from samzapy.spark.replay.driver import replay
    from samzapy.spark.session import get_spark

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            spec = PageViewSpec(count=args.count, users=args.users, pages=1000, disorder_ms=60_000)
            t = time.perf_counter()
            produce_json(
                servers, INPUT, args.partitions, ((v["user_id"].encode(), v) for _, v in pageviews(spec))
            )
            produce_end_of_stream(servers, INPUT)
            records = args.count + args.partitions  # the views and one end-of-stream per partition
            print(
                f"produced {args.count:,} views for {args.users:,} users in {time.perf_counter() - t:.1f} s"
            )

            streaming = write_config(tmp, "bench-streaming", servers)
            metrics = tmp / "metrics.json"
            command = [sys.executable, "-m", "samzapy", "run", str(streaming), "--exit-at-end"]
            ready, total = run_timed([*command, "--metrics-file", str(metrics)])
            snapshot = json.loads(metrics.read_text())
            processed = processed_messages(snapshot)
            assert processed == records, f"streaming processed {processed:,} of {records:,}"
            want = outputs(servers, "bench-streaming-counts")

            spark, spark_start = get_spark(args.master, "samzapy-bench-replay")
            spark.sparkContext.setLogLevel("ERROR")
            rows = []
            for run in range(1, args.runs + 1):
                config = write_config(tmp, f"bench-replay-{run}", servers)
                stats = replay(config)
                assert stats.records == records, f"replay {run} read {stats.records:,} of {records:,}"
                got = outputs(servers, f"bench-replay-{run}-counts")
                assert got == want, f"replay {run}: outputs differ from the streaming run's"
                rows.append((run, stats))
        finally:
            dev_broker.stop(tmp / "broker")

    busy = total - ready
    stream_rate = records / busy
    print(f"\n{records:,} input records, {sum(want.values()):,} window outputs (identical in every run)")
    print(f"Spark session start-up: {spark_start:.1f} s (in no row below)")
    print(
        f"streaming process start-up (interpreter, broker metadata, restore): {ready:.1f} s (not in its row)"
    )
    table = [("run", "s", "msg/s", "vs streaming", "plan / Spark job / finalize (s)")]
    table.append(("streaming (`samzapy run`)", f"{busy:.1f}", f"{stream_rate:,.0f}", "1.00x", ""))
    for run, stats in rows:
        seconds = stats.total_s - stats.spark_start_s
        rate = records / seconds
        parts = f"{stats.plan_s:.1f} / {stats.spark_job_s:.1f} / {stats.finalize_s:.1f}"
        table.append(
            (
                f"Spark replay, job {run}",
                f"{seconds:.1f}",
                f"{rate:,.0f}",
                f"{rate / stream_rate:.2f}x",
                parts,
            )
        )
    print_table(table)


def print_table(rows: list[tuple[str, ...]]) -> None:
    """A Markdown table, first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(cells: tuple[str, ...]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    print()
    print(line(rows[0]))
    print("|" + "|".join("-" * (w + 1) + ":" if i else "-" * (w + 2) for i, w in enumerate(widths)) + "|")
    for row in rows[1:]:
        print(line(row))


if __name__ == "__main__":
    main()

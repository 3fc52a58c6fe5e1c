"""Window count throughput: page views per user per hour, input topic to committed state.

Starts its own dev broker, produces N page views keyed by user (4 partitions, U users, three
hours of event time) and an end-of-stream marker, then runs the pageview-counter job
(``config/pageview-counter.properties``, tumbling hour windows, the input read directly:
``watermark.upstream.tasks=0``) with ``--exit-at-end``: every view is counted in RocksDB
stores with changelogs, every window is emitted, and the final commit is acknowledged. It
prints the rate over the processing phase (from the first task starting to exit; start-up and
restore excluded, shown apart) and over the whole run.

    python benchmarks/bench_window_count.py                  # 1M views, 100k users
    python benchmarks/bench_window_count.py --count 100000 --users 10000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

CONFIG = Path(__file__).parents[1] / "config" / "pageview-counter.properties"


def run_timed(command: list[str]) -> tuple[float, float]:
    """Run ``command``; (seconds until its first task starts reading, total seconds)."""
    started = time.perf_counter()
    ready = None
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        for line in process.stderr:
            if ready is None and "starts at offset" in line:
                ready = time.perf_counter() - started
            if "ERROR" in line or "Error" in line:
                sys.stderr.write(line)
        code = process.wait()
    if code != 0:
        raise SystemExit(f"the job failed with exit code {code}")
    return ready or 0.0, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=Path(tmp) / "broker")
        try:
            servers = info.bootstrap_servers
            spec = PageViewSpec(count=args.count, users=args.users, pages=1000, disorder_ms=60_000)
            t = time.perf_counter()
            produce_json(
                servers,
                "bench-views",
                args.partitions,
                ((v["user_id"].encode(), v) for _, v in pageviews(spec)),
            )
            produce_end_of_stream(servers, "bench-views")
            print(
                f"produced {args.count:,} views for {args.users:,} users in {time.perf_counter() - t:.1f} s"
            )
            props = dict(load_config(CONFIG))
            props.update(
                {
                    "task.inputs": "kafka.bench-views",
                    "watermark.upstream.tasks": "0",
                    "window.late.stream": "",
                    "window.output.stream": "kafka.bench-counts",
                    "systems.kafka.consumer.bootstrap.servers": servers,
                    "systems.kafka.producer.bootstrap.servers": servers,
                    "job.logged.store.base.dir": f"{tmp}/state",
                    "task.commit.ms": "10000",
                }
            )
            config = Path(tmp) / "counter.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            metrics = Path(tmp) / "metrics.json"
            command = [
                sys.executable,
                "-m",
                "samzapy",
                "run",
                str(config),
                "--exit-at-end",
                "--metrics-file",
                str(metrics),
            ]
            ready, total = run_timed(command)
            snapshot = json.loads(metrics.read_text())
            processed = sum(
                g.get("messages-actually-processed", 0) for n, g in snapshot.items() if n.startswith("task.")
            )
            puts = sum(g.get("puts", 0) for n, g in snapshot.items() if n.startswith("store."))
            late = sum(g.get("late-messages", 0) for n, g in snapshot.items() if n.startswith("task."))
            busy = total - ready
            print(f"job: {processed:,} messages, {late:,} late, {puts:,} store writes reaching the engine")
            print(f"start-up (process, broker, restore): {ready:.1f} s")
            print(f"processing to committed state: {busy:.1f} s -> {processed / busy:,.0f} msg/s")
            print(f"whole run: {total:.1f} s -> {processed / total:,.0f} msg/s")
        finally:
            dev_broker.stop(Path(tmp) / "broker")


if __name__ == "__main__":
    main()

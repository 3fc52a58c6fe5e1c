"""Window kinds and emission modes next to the tumbling count; the event-time stream-table
join next to the processing-time one (issue 19).

Starts its own dev broker and produces N page views keyed by user (4 partitions, U users,
three hours of event time, a minute of disorder) with an end-of-stream marker, then runs the
pageview-counter job (``config/pageview-counter.properties``, input read directly) to the end
once per configuration, each as its own job on the same topic:

* tumbling hour windows, final emission (the baseline: ``bench_window_count``'s main row);
* sliding windows (60 s time difference), final emission;
* count windows (10 views, hopping by 5), emitted on their last view;
* tumbling hour windows with ``window.emit=update`` (a record per view, plus the finals).

Then P profile updates and the same views go to two topics, and the stream-table join runs
once with ``config/pageview-enrich.properties`` (processing time: the latest profile) and once
with ``config/pageview-enrich-event-time.properties`` (the profile valid at the view's time,
from a versioned table; views wait for the profiles' progress).

Rates are over each job's processing phase (ready to exit), so the start-up is not counted.

    python -m benchmarks.bench_window_kinds --size small
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks._common import (
    ROOT,
    Result,
    arguments,
    processed_messages,
    run_child,
    samzapy_run,
    write_properties,
)
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json, profiles
from samzapy.kafka import broker as dev_broker

PARTITIONS = 4
VIEWS, PROFILES = "bench-kind-views", "bench-kind-profiles"
WINDOW_CASES = {
    "tumbling (final)": {},
    "sliding 60 s (final)": {"window.type": "sliding", "window.size.ms": "60000"},
    "count 10 by 5": {"window.type": "count", "window.count.size": "10", "window.count.step": "5"},
    "tumbling, emit=update": {"window.emit": "update"},
}
JOIN_CASES = {
    "stream-table join, processing time": "pageview-enrich.properties",
    "stream-table join, event time (versioned)": "pageview-enrich-event-time.properties",
}


def job_config(tmp: Path, servers: str, file: str, tag: str, overrides: dict[str, str]) -> Path:
    """``config/<file>`` on the benchmark broker, its job, changelogs and state made unique."""
    props = dict(load_config(ROOT / "config" / file))
    props["job.name"] = f"{props['job.name']}-{tag}"
    for key, value in list(props.items()):
        if key.endswith(".changelog"):
            props[key] = f"{value}-{tag}"
    props.update(
        {
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.producer.bootstrap.servers": servers,
            "job.logged.store.base.dir": f"{tmp}/state-{tag}",
            "task.commit.ms": "10000",
            **overrides,
        }
    )
    return write_properties(tmp / f"{tag}.properties", props)


def processed_rate(tmp: Path, config: Path, tag: str) -> tuple[float, float, int, float]:
    """Run ``config`` to the end: (messages per second of processing, RSS MB, messages, CPU
    microseconds per message)."""
    metrics = tmp / f"metrics-{tag}.json"
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    snapshot = json.loads(metrics.read_text())
    processed = processed_messages(snapshot)
    return processed / run.busy_s, run.rss_mb, processed, run.busy_cpu_s / max(processed, 1) * 1e6


def windows(tmp: Path, servers: str, result: Result) -> None:
    base = None
    for n, (what, overrides) in enumerate(WINDOW_CASES.items()):
        tag = f"kind{n}"
        config = job_config(
            tmp,
            servers,
            "pageview-counter.properties",
            tag,
            {
                "task.inputs": f"kafka.{VIEWS}",
                "watermark.upstream.tasks": "0",
                "window.late.stream": "",
                "window.output.stream": f"kafka.bench-kind-out-{tag}",
                **overrides,
            },
        )
        rate, rss, processed, cpu_us = processed_rate(tmp, config, tag)
        base = base or ("tumbling (final)", rate)
        result.add(f"window count, {what}", rate, "msg/s", limit=base, rss_mb=rss, cpu_us=cpu_us)
        result.note(f"{what}: {processed:,} messages")


def joins(tmp: Path, servers: str, result: Result) -> None:
    base = None
    for n, (what, file) in enumerate(JOIN_CASES.items()):
        tag = f"join{n}"
        config = job_config(
            tmp,
            servers,
            file,
            tag,
            {
                "task.inputs": f"kafka.{PROFILES},kafka.{VIEWS}",
                "join.table.stream": PROFILES,
                f"systems.kafka.streams.{PROFILES}.samza.bootstrap": "true",
                "join.output.stream": f"kafka.bench-kind-enriched-{tag}",
            },
        )
        rate, rss, _, cpu_us = processed_rate(tmp, config, tag)
        base = base or ("processing-time join", rate)
        result.add(what, rate, "msg/s", limit=base, rss_mb=rss, cpu_us=cpu_us)


def main() -> None:
    args = arguments(__doc__, count=(5_000, 100_000, 500_000), users=(500, 10_000, 50_000))
    result = Result("window_kinds")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            started = time.perf_counter()
            spec = PageViewSpec(count=args.count, users=args.users, pages=1000, disorder_ms=60_000)
            produce_json(servers, VIEWS, PARTITIONS, ((v["user_id"].encode(), v) for _, v in pageviews(spec)))
            produce_end_of_stream(servers, VIEWS)
            produce_json(servers, PROFILES, PARTITIONS, profiles(args.users * 2, args.users, seed=3))
            produce_end_of_stream(servers, PROFILES)
            result.note(
                f"{args.count:,} views, {args.users:,} users, {args.users * 2:,} profile updates, "
                f"{PARTITIONS} partitions, produced in {time.perf_counter() - started:.1f} s"
            )
            windows(tmp, servers, result)
            joins(tmp, servers, result)
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

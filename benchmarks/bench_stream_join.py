"""Stream-stream join (ad clicks to impressions): throughput, and latency from event append
to joined output.

Starts its own dev broker and runs the ad-click-join job (``config/ad-click-join.properties``)
twice:

1. **throughput**: N impressions and their clicks (30% click rate, 10% duplicate clicks,
   orphans) are produced first, with end-of-stream markers; the job runs with
   ``--exit-at-end``. Rate = input events / processing time (start-up excluded, shown apart).
2. **latency**: the job runs live while impressions and clicks are produced at ``--rate``
   events/s; latency of a joined record = its append time (the job's producer timestamp)
   minus the append time of the later of its impression and (first) click. p50/p99/max.

The stores' changelogs are coalesced per commit (``--coalesce true``, samzapy's default);
``--flush-at-head true|false`` and ``--local-checkpoint-ms N`` override the job config's
``stores.<store>.flush.at.head`` and ``stores.<store>.local.checkpoint.ms`` (A/B runs).

    python -m benchmarks.bench_stream_join --impressions 200000 --rate 2000 --seconds 20
    python -m benchmarks.bench_stream_join --size small --commit-ms 5000 --fetch-wait-ms 10
    python -m benchmarks.bench_stream_join --size small --trace /tmp/trace.json

``--rate 0`` (the default at sizes small and full) runs the latency at half the input rate the
throughput run just measured; ``--busy-core 1`` (default there) runs it a second time while
another process spins on a core.

``--trace FILE`` runs the latency job under :mod:`benchmarks.join_trace` and prints where the
slowest 5 % of joins spent their latency; ``--latency-only 1`` skips the throughput run.

``--join-layouts 1,2,1,2`` runs the throughput job once per entry, over the same produced input,
with ``join.state.layout`` set to it (the store layouts of
:mod:`samzapy.operators.stream_join_layout`): an A/B of the layouts interleaved in one run, each
row with its changelog records per input event; ``--throughput-only 1`` skips the latency runs.
``--latency-layouts 1,2`` does the same for the latency runs (the changelog records per input
event of a live run, where few windows close: round 4's 2.43).

    python -m benchmarks.bench_stream_join --size small --join-layouts 1,2,1,2 --throughput-only 1
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from kafka import TopicPartition

from benchmarks._common import ROOT, Result, arguments, process_cpu_s, run_child
from benchmarks.join_trace import breakdown
from samzapy.config import load_config
from samzapy.generate import AdSpec, ads, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.streams import SystemStream

CONFIG = Path(__file__).parents[1] / "config" / "ad-click-join.properties"
PARTITIONS = 4


def write_config(
    tmp: str,
    servers: str,
    tag: str,
    coalesce: str,
    commit_ms: int = 0,
    fetch_wait_ms: int = 0,
    local_checkpoint_ms: int = -1,
    flush_at_head: str = "",
    inputs: str = "",
    layout: str = "",
) -> Path:
    """The job's config for run ``tag`` (its own job name, changelogs and outputs; its inputs
    those of run ``inputs`` when given); ``layout`` sets ``join.state.layout``."""
    props = dict(load_config(CONFIG))
    if layout:  # else the config's (the job's default)
        props["join.state.layout"] = layout
    inputs = inputs or tag
    if commit_ms > 0:  # else the config's task.commit.ms
        props["task.commit.ms"] = str(commit_ms)
    if fetch_wait_ms > 0:  # else samzapy's input consumer default (100 ms)
        props["systems.kafka.consumer.fetch.max.wait.ms"] = str(fetch_wait_ms)
    for key, value in list(props.items()):
        if key.endswith(".changelog"):
            props[key] = f"{value}-{tag}"
            props[f"{key}.coalesce"] = coalesce
            store = key.removesuffix(".changelog")
            if local_checkpoint_ms >= 0:  # else the config's (0: at every commit)
                props[store + ".local.checkpoint.ms"] = str(local_checkpoint_ms)
            if flush_at_head:  # else the config's (or false)
                props[store + ".flush.at.head"] = flush_at_head
    props.update(
        {
            "job.name": f"bench-join-{tag}",
            "task.inputs": f"kafka.imp-{inputs},kafka.clk-{inputs}",
            "join.impressions.stream": f"imp-{inputs}",
            "join.clicks.stream": f"clk-{inputs}",
            "join.output.stream": f"kafka.joined-{tag}",
            "join.unjoined.stream": f"kafka.unjoined-{tag}",
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.producer.bootstrap.servers": servers,
            "job.logged.store.base.dir": f"{tmp}/state-{tag}",
        }
    )
    path = Path(tmp) / f"join-{tag}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def read_all(servers: str, topic: str) -> list:
    consumer = reader_consumer(servers)
    try:
        return [
            r
            for p in range(PARTITIONS)
            for b in read_partition(consumer, TopicPartition(topic, p), 0)
            for r in b
        ]
    finally:
        consumer.close()


def throughput(tmp: str, servers: str, args: argparse.Namespace, result: Result) -> float:
    """Run the join over a produced backlog (once per ``--join-layouts`` entry, interleaved);
    add its rows; the input events per second of the last run."""
    impressions = args.impressions
    imps, clicks = ads(
        AdSpec(impressions=impressions, orphan_clicks=impressions // 100, span_ms=4 * 3_600_000)
    )
    produce_json(servers, "imp-tp", PARTITIONS, imps)
    produce_json(servers, "clk-tp", PARTITIONS, clicks)
    for topic in ("imp-tp", "clk-tp"):
        produce_end_of_stream(servers, topic)
    layouts = [x.strip() for x in args.join_layouts.split(",") if x.strip()] or [""]
    rate = 0.0
    for n, layout in enumerate(layouts):
        tag = "tp" if len(layouts) == 1 else f"tp{n}"
        config = write_config(
            tmp,
            servers,
            tag,
            args.coalesce,
            local_checkpoint_ms=args.local_checkpoint_ms,
            flush_at_head=args.flush_at_head,
            inputs="tp",
            layout=layout,
        )
        run = run_child([sys.executable, "-m", "samzapy", "run", str(config), "--exit-at-end"])
        events = len(imps) + len(clicks)
        joined = len(read_all(servers, f"joined-{tag}"))
        changelogs = [v for k, v in load_config(config).items() if k.endswith(".changelog")]
        logged = sum(len(read_all(servers, SystemStream.parse(c).stream)) for c in changelogs)
        name = "samzapy join" + (f" (store layout {layout})" if layout else "")
        limit = ("Kafka Streams 20k/s", 20_000.0)
        cpu_us = run.busy_cpu_s / events * 1e6
        rate = events / run.busy_s
        result.add(f"{name}, input events", rate, "ev/s", rss_mb=run.rss_mb, cpu_us=cpu_us)
        result.add(f"{name}, joined pairs", joined / run.busy_s, "pairs/s", limit=limit)
        result.add(f"{name}, changelog records per input event", logged / events, "rec/ev")
        result.note(
            f"{name} throughput: {len(imps):,} impressions + {len(clicks):,} clicks -> {joined:,} "
            f"joined; start-up {run.ready_s:.1f} s, processing {run.busy_s:.1f} s, "
            f"{cpu_us:.1f} us CPU per input event, {logged:,} changelog records"
        )
    return rate


def latency(
    tmp: str,
    servers: str,
    args: argparse.Namespace,
    result: Result,
    rate: float,
    tag: str,
    busy: bool,
    layout: str = "",
) -> None:
    """Run the join live at ``rate`` input events/s; add its latency rows. ``busy``: another
    process spins on a core all the while (the job and the producer share what is left);
    ``layout``: ``join.state.layout`` (else the config's)."""
    seconds = args.seconds
    # about 1.33 events per impression: 30% are clicked, 10% of clicks twice, a few orphans
    impressions = int(rate * seconds / 1.33)
    imps, clicks = ads(AdSpec(impressions=impressions, span_ms=seconds * 1000, max_click_delay_ms=2_000))
    for topic in (f"imp-{tag}", f"clk-{tag}"):
        produce_json(servers, topic, PARTITIONS, [])
    config = write_config(
        tmp,
        servers,
        tag,
        args.coalesce,
        args.commit_ms,
        args.fetch_wait_ms,
        args.local_checkpoint_ms,
        args.flush_at_head,
        layout=layout,
    )
    metrics = Path(tmp) / f"metrics-{tag}.json"
    # --trace: the job runs under benchmarks.join_trace, which writes its loop's timeline
    program = ["-m", "benchmarks.join_trace", args.trace] if args.trace else ["-m", "samzapy"]
    job = subprocess.Popen(
        [sys.executable, *program, "run", str(config), "--metrics-file", str(metrics)],
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    live_cpu_s = 0.0
    try:
        time.sleep(5)  # start-up
        started_cpu = process_cpu_s(job.pid) or 0.0
        events = sorted(
            [(v["ts"], f"imp-{tag}", k, v) for k, v in imps]
            + [(v["ts"], f"clk-{tag}", k, v) for k, v in clicks],
            key=lambda e: e[0],
        )
        producer = Producer(servers)
        started = time.perf_counter()
        base = events[0][0]
        span = (events[-1][0] - base) or 1
        for n, (ts, topic, key, value) in enumerate(events):
            due = started + (ts - base) / span * seconds
            if n % 100 == 0 and due > time.perf_counter():
                time.sleep(due - time.perf_counter())
            producer.send(topic, key, orjson.dumps(value))
        producer.flush()
        producer.close()
        time.sleep(5)  # let the job catch up
        live_cpu_s = (process_cpu_s(job.pid) or started_cpu) - started_cpu
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=60)
    appended: dict[str, tuple[int, str, int, int]] = {}  # event id -> (append time, where)
    for record in read_all(servers, f"imp-{tag}"):
        where = (record.timestamp, f"imp-{tag}", record.partition, record.offset)
        appended.setdefault(orjson.loads(record.value)["impression_id"], where)
    for record in read_all(servers, f"clk-{tag}"):
        where = (record.timestamp, f"clk-{tag}", record.partition, record.offset)
        appended.setdefault(orjson.loads(record.value)["click_id"], where)
    # per joined record: its append time and the later of its two inputs
    joins = [
        (r.timestamp, *max(appended[v["impression_id"]], appended[v["click_id"]]))
        for r in read_all(servers, f"joined-{tag}")
        for v in [orjson.loads(r.value)]
    ]
    latencies = sorted(out - trigger for out, trigger, *_ in joins)
    if not latencies:
        raise SystemExit("no joined output")
    if args.trace:
        for line in breakdown(json.loads(Path(args.trace).read_text()), joins):
            result.note(f"trace: {line}")

    def pct(p: float) -> int:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    offered = len(events) / seconds
    where = (f", store layout {layout}" if layout else "") + (", second core busy" if busy else "")
    result.add(f"join latency p50 at {offered:,.0f} ev/s{where}", pct(0.5), "ms")
    result.add(f"join latency p99 at {offered:,.0f} ev/s{where}", pct(0.99), "ms")
    # the job's CPU from the first input to the end of the run (idle start-up left out)
    result.add(f"join latency run{where}, CPU per input event", live_cpu_s / len(events) * 1e6, "us")
    result.note(f"join latency{where}: {len(latencies):,} joins in {seconds} s, max {latencies[-1]} ms")
    # Input waits while a commit runs (store flushes, producer flush, local checkpoints): the
    # mean commit time says how much of the tail that explains.
    container = orjson.loads(metrics.read_bytes()).get("container", {})
    commits = container.get("commit-calls", 0)
    if commits:
        mean_ms = container.get("commit-ns", 0) / commits / 1e6
        result.add(f"join latency run{where}, mean commit time", mean_ms, "ms")
        result.note(f"join latency run: {commits} commits, {mean_ms:.0f} ms each on average")
    # What flushing at the head costs: changelog records per input event (coalescing saves less)
    changelogs = [v for k, v in load_config(config).items() if k.endswith(".changelog")]
    logged = sum(len(read_all(servers, SystemStream.parse(c).stream)) for c in changelogs)
    result.add(f"join latency run{where}, changelog records per input event", logged / len(events), "rec/ev")


def main() -> None:
    args = arguments(
        __doc__,
        impressions=(5_000, 50_000, 200_000),
        rate=(1_000, 0, 0),
        seconds=(5, 15, 20),
        coalesce="true",
        commit_ms=0,
        fetch_wait_ms=0,
        local_checkpoint_ms=-1,
        trace="",
        latency_only=0,
        throughput_only=0,
        join_layouts="",
        latency_layouts="",
        flush_at_head="",
        busy_core=(0, 1, 1),
    )
    result = Result("stream_join")
    with tempfile.TemporaryDirectory() as tmp:
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=Path(tmp) / "broker")
        try:
            servers = info.bootstrap_servers
            result.note(f"join: stores.<store>.changelog.coalesce={args.coalesce}")
            measured = 0.0 if args.latency_only else throughput(tmp, servers, args, result)
            rate = args.rate or measured / 2 or 5_000
            commit = f"task.commit.ms={args.commit_ms}" if args.commit_ms else "the config's task.commit.ms"
            wait = (
                f"fetch.max.wait.ms={args.fetch_wait_ms}" if args.fetch_wait_ms else "the default fetch wait"
            )
            local = (
                f"stores.<store>.local.checkpoint.ms={args.local_checkpoint_ms}"
                if args.local_checkpoint_ms >= 0
                else "the config's local.checkpoint.ms"
            )
            head = f"flush.at.head={args.flush_at_head or 'as configured'}"
            if not args.throughput_only:
                result.note(f"join latency run: {commit}, {wait}, {local}, {head}")
                # --latency-layouts 1,2: the live runs once per layout, interleaved
                layouts = [x.strip() for x in args.latency_layouts.split(",") if x.strip()] or [""]
                for n, layout in enumerate(layouts):
                    tag = "lat" if len(layouts) == 1 else f"lat{n}"
                    latency(tmp, servers, args, result, rate, tag, busy=False, layout=layout)
                    if args.busy_core:
                        latency(tmp, servers, args, result, rate, f"{tag}-busy", busy=True, layout=layout)
        finally:
            dev_broker.stop(Path(tmp) / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

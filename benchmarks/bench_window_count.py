"""Window count: page views per user per hour, input topic to committed state, vs the peers.

Starts its own dev broker, produces N page views keyed by user (4 partitions, U users, three
hours of event time, a minute of disorder) and an end-of-stream marker, then measures on that
one topic:

1. raw kafka-python consume of the topic (the limit samzapy's rate is compared with);
2. samzapy: the pageview-counter job (``config/pageview-counter.properties``, tumbling hour
   windows, the input read directly: ``watermark.upstream.tasks=0``) with ``--exit-at-end``:
   every view counted in a RocksDB store with a changelog, every window emitted, the final
   commit acknowledged. Rate over the processing phase (first task ready to exit). The
   store's changelog is coalesced per commit (``--coalesce true``, samzapy's default, like
   Quix's and Kafka Streams' per-commit changelog); a second run, as a separate job on the
   same topic, measures the other setting;
3. samzapy restore: the same job again on a wiped state directory (no new input): seconds
   until its task is ready, i.e. the window state rebuilt from the changelog;
4. Quix Streams and Faust (each in its own venv, see :mod:`benchmarks.peers`): the same count
   on the same topic; rate from their first message to their last; Quix's restore likewise.

The input topic is created with explicit ``retention.*`` configs: Quix derives its changelog
configs from the input topic's and fails on the dev broker's empty DescribeConfigs otherwise.

With ``--processes 1,2`` it measures instead the same count in group mode (the job's
members in one consumer group) run by ``samzapy run --processes N`` for each N, alternating
(1, 2, 1, 2), on ``--processes-count`` views (1M at size small): the rate over the
processing phase (from the first member running tasks to the parent's exit, each member
stopping at the end of its input) and the CPU per message of the whole tree (parent and
members).

    python -m benchmarks.bench_window_count --size full      # 1M views, 100k users
    python -m benchmarks.bench_window_count --count 100000 --users 10000 --peers quix
    python -m benchmarks.bench_window_count --processes 1,2   # every core of a host
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks import peers
from benchmarks._common import (
    ROOT,
    Result,
    arguments,
    count_records,
    process_cpu_s,
    processed_messages,
    raw_consume,
    run_child,
    samzapy_run,
    write_properties,
)
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

CONFIG = ROOT / "config" / "pageview-counter.properties"
TOPIC = "bench-views"
PARTITIONS = 4
PEER_TIMEOUT_S = 900


def make_topic(servers: str, count: int, users: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=servers)
    configs = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, topic_configs=configs)])
    admin.close()
    spec = PageViewSpec(count=count, users=users, pages=1000, disorder_ms=60_000)
    produce_json(servers, TOPIC, PARTITIONS, ((v["user_id"].encode(), v) for _, v in pageviews(spec)))
    produce_end_of_stream(servers, TOPIC)


def samzapy_config(tmp: Path, servers: str, coalesce: str, tag: str) -> Path:
    """The counter job's config for this benchmark; ``tag`` keeps the runs' jobs apart."""
    props = dict(load_config(CONFIG))
    props.update(
        {
            "job.name": f"pageview-counter-{tag}",
            "task.inputs": f"kafka.{TOPIC}",
            "watermark.upstream.tasks": "0",
            "window.late.stream": "",
            "window.output.stream": f"kafka.bench-counts-{tag}",
            "systems.kafka.consumer.bootstrap.servers": servers,
            "systems.kafka.producer.bootstrap.servers": servers,
            "job.logged.store.base.dir": f"{tmp}/state-{tag}",
            "task.commit.ms": "10000",
            "stores.pageview-counts.changelog": f"kafka.bench-counts-changelog-{tag}",
            "stores.pageview-counts.changelog.coalesce": coalesce,
        }
    )
    return write_properties(tmp / f"counter-{tag}.properties", props)


@dataclass
class Figures:
    """One run of a window count: its processing rate, CPU per message, and the row's name."""

    who: str
    rate: float
    cpu_us: float
    rss_mb: float


def run_samzapy(tmp: Path, servers: str, coalesce: str, result: Result, tag: str) -> tuple[Figures, Path]:
    """Run the counter to the end of its input as job ``tag``; its figures and config."""
    config = samzapy_config(tmp, servers, coalesce, tag)
    metrics = tmp / f"metrics-{tag}.json"
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    snapshot = json.loads(metrics.read_text())
    processed = processed_messages(snapshot)
    logged = count_records(servers, f"bench-counts-changelog-{tag}")
    outputs = count_records(servers, f"bench-counts-{tag}")
    cpu_us = run.busy_cpu_s / max(processed, 1) * 1e6
    result.note(
        f"samzapy {tag} (changelog.coalesce={coalesce}): {processed:,} messages, "
        f"{logged:,} changelog records ({logged / max(processed, 1):.2f} per message), "
        f"{outputs:,} window outputs; start-up {run.ready_s:.1f} s; processing "
        f"{processed / run.busy_s:,.0f} msg/s, CPU {cpu_us:.1f} us per message "
        f"({run.cpu_s / max(processed, 1) * 1e6:.1f} with start-up)"
    )
    return Figures("samzapy", processed / run.busy_s, cpu_us, run.rss_mb), config


def samzapy_restore(config: Path, tag: str, tmp: Path, result: Result) -> tuple[float, float]:
    """Run the counter again on a wiped state directory: (start-up before the restore,
    restore) in seconds; the restore is the stores' ``restore-time``."""
    shutil.rmtree(tmp / f"state-{tag}", ignore_errors=True)
    metrics = tmp / f"metrics-restore-{tag}.json"
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    snapshot = json.loads(metrics.read_text())
    restore_s = sum(g.get("restore-time", 0) for n, g in snapshot.items() if n.startswith("store.")) / 1000
    result.note(f"samzapy restore run: ready in {run.ready_s:.2f} s, of which restore {restore_s:.2f} s")
    return run.ready_s - restore_s, restore_s


def run_processes(
    tmp: Path, servers: str, processes: int, result: Result, tag: str, broker_pid: int
) -> Figures:
    """The counter in group mode under ``samzapy run --processes N`` as job ``tag``.

    Also notes the dev broker's CPU per message over the run: it shares the host's cores.
    """
    config = samzapy_config(tmp, servers, "true", tag)
    group = {"job.coordinator.factory": "group", "job.coordinator.session.timeout.ms": "6000"}
    config.write_text(config.read_text() + "".join(f"{k}={v}\n" for k, v in group.items()))
    metrics = tmp / f"metrics-{tag}.json"
    command = samzapy_run(config, "--processes", str(processes), "--metrics-file", str(metrics))
    broker_cpu = process_cpu_s(broker_pid) or 0.0
    run = run_child(command, ready_marker="running tasks [", tree_cpu=True)
    broker_cpu = (process_cpu_s(broker_pid) or 0.0) - broker_cpu
    snapshots = [metrics] if processes == 1 else [tmp / f"metrics-{tag}-{i}.json" for i in range(processes)]
    processed = sum(processed_messages(json.loads(path.read_text())) for path in snapshots)
    cpu_us = run.busy_cpu_s / max(processed, 1) * 1e6
    result.note(
        f"samzapy --processes {processes} ({tag}): {processed:,} messages; first task running after "
        f"{run.ready_s:.1f} s; processing {processed / run.busy_s:,.0f} msg/s over {run.busy_s:.1f} s, "
        f"CPU {cpu_us:.1f} us per message (parent and members); the dev broker "
        f"{broker_cpu / max(processed, 1) * 1e6:.1f} us per message over the whole run"
    )
    return Figures(f"{processes} processes", processed / run.busy_s, cpu_us, run.rss_mb)


def compare_processes(
    tmp: Path, servers: str, counts: list[int], rounds: int, result: Result, broker_pid: int
) -> None:
    """``--processes`` for each of ``counts``, alternating, ``rounds`` times; rows and ratios."""
    runs: dict[int, list[Figures]] = {n: [] for n in counts}
    for round_ in range(rounds):
        for n in counts:
            runs[n].append(run_processes(tmp, servers, n, result, f"p{n}-{round_}", broker_pid))
    for n, figures in runs.items():
        result.add(
            f"samzapy window count, group mode, --processes {n}",
            _mean([f.rate for f in figures]),
            "msg/s",
            rss_mb=max(f.rss_mb for f in figures),
            cpu_us=_mean([f.cpu_us for f in figures]),
        )
    base = runs[counts[0]]
    for n in counts[1:]:
        ratio = _mean([b.rate / a.rate for a, b in zip(base, runs[n], strict=True)])
        result.add(f"--processes {n} / --processes {counts[0]}, rate", ratio, "x")


def run_peer(peer: str, servers: str, count: int, tmp: Path, result: Result, tag: str) -> Figures | None:
    """Run ``peer``'s window count as group ``bench-<peer>-<tag>``; None when it cannot run."""
    try:
        figures = _peer_child(peer, servers, count, tmp, tag)
    except (RuntimeError, SystemExit, ValueError, IndexError) as exc:
        result.note(f"{peer}: could not run: {exc}")
        return None
    rate = figures["messages"] / figures["processing_s"]
    cpu_us = figures["processing_cpu_s"] / max(figures["messages"], 1) * 1e6
    result.note(
        f"{peer} {tag}: start-up (group join, assignment) {figures['startup_s']:.1f} s; processing "
        f"{rate:,.0f} msg/s, CPU {cpu_us:.1f} us per message"
    )
    return Figures(peer, rate, cpu_us, figures["rss_mb"])


def quix_restore(servers: str, count: int, tmp: Path, result: Result, tag: str) -> tuple[float, float]:
    """Quix again on a wiped state directory, same group: (join, recovery) in seconds, from
    its own log (see :mod:`benchmarks.peer_quix`)."""
    figures = _peer_child("quix", servers, count, tmp, tag, "--restore")
    recovery = figures["recovery_s"] or 0.0
    result.note(f"quix restore run: joined in {figures['join_s']:.2f} s, recovery {recovery:.2f} s")
    return figures["join_s"], recovery


def _peer_child(peer: str, servers: str, count: int, tmp: Path, tag: str, *extra: str) -> dict:
    python = peers.python_of(peer)
    script = str(ROOT / "benchmarks" / f"peer_{peer}.py")
    state, group = str(tmp / f"{peer}-state-{tag}"), f"bench-{peer}-{tag}"
    run = run_child(
        [str(python), script, servers, TOPIC, str(count), state, group, *extra],
        ready_marker=None,
        timeout_s=PEER_TIMEOUT_S,
    )
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    figures["rss_mb"] = run.rss_mb
    return figures


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def report(result: Result, runs: dict[str, list[Figures]], limit: tuple[str, float]) -> None:
    """One row per runner (mean of its rounds), and samzapy's ratio to each peer by rate and
    by CPU per message, each the mean of the rounds' ratios (a round's runs are adjacent)."""
    ours = runs["samzapy"]
    for who, figures in runs.items():
        name = "samzapy window count" if who == "samzapy" else f"{who} window count"
        result.add(
            f"{name}, processing",
            _mean([f.rate for f in figures]),
            "msg/s",
            limit=limit,
            rss_mb=max(f.rss_mb for f in figures),
            cpu_us=_mean([f.cpu_us for f in figures]),
        )
        each = ", ".join(f"{f.rate:,.0f} msg/s {f.cpu_us:.1f} us" for f in figures)
        result.note(f"{name}, rounds: {each}")
    for who, figures in runs.items():
        if who == "samzapy" or len(figures) != len(ours):
            continue
        by_rate = _mean([a.rate / b.rate for a, b in zip(ours, figures, strict=True)])
        by_cpu = _mean([b.cpu_us / a.cpu_us for a, b in zip(ours, figures, strict=True)])
        result.add(f"samzapy / {who}, processing rate", by_rate, "x")
        result.add(f"samzapy / {who}, by CPU per message", by_cpu, "x")


def main() -> None:
    args = arguments(
        __doc__,
        count=(20_000, 200_000, 1_000_000),
        users=(2_000, 20_000, 100_000),
        peers="quix,faust",
        coalesce="true",
        rounds=2,
        processes="",
        processes_count=(100_000, 1_000_000, 2_000_000),
    )
    if args.processes:  # long enough that the group's join (~5 s on the dev broker) is not the run
        args.count = args.processes_count
    result = Result("window_count" if not args.processes else "window_processes")
    names = [p for p in args.peers.split(",") if p]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            started = time.perf_counter()
            make_topic(servers, args.count, args.users)
            result.note(
                f"{args.count:,} views, {args.users:,} users, {PARTITIONS} partitions, "
                f"produced in {time.perf_counter() - started:.1f} s; {args.rounds} rounds of "
                + (
                    f"--processes {args.processes}"
                    if args.processes
                    else f"samzapy, {', '.join(names) or 'no peer'}"
                )
                + " interleaved"
            )
            if args.processes:
                counts = [int(n) for n in args.processes.split(",")]
                compare_processes(tmp, servers, counts, args.rounds, result, info.pid)
            else:
                compare_peers(tmp, servers, args, names, result)
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


def compare_peers(
    tmp: Path, servers: str, args: argparse.Namespace, names: list[str], result: Result
) -> None:
    """The window count of samzapy and its peers, interleaved, and the restore runs (module doc)."""
    raw = raw_consume(servers, TOPIC, PARTITIONS, c_decoder=False)
    limit = ("raw consume", raw.rate)
    result.add("raw kafka-python consume (same topic)", raw.rate, "msg/s", limit=limit, cpu_us=raw.cpu_us)
    fast = raw_consume(servers, TOPIC, PARTITIONS, c_decoder=True)
    result.add("consume with samzapy's C batch decoder", fast.rate, "msg/s", limit=limit, cpu_us=fast.cpu_us)
    runs: dict[str, list[Figures]] = {"samzapy": []}
    config = None
    for round_ in range(args.rounds):
        figures, config = run_samzapy(tmp, servers, args.coalesce, result, f"main{round_}")
        runs["samzapy"].append(figures)
        for peer in names:
            peer_figures = run_peer(peer, servers, args.count, tmp, result, str(round_))
            if peer_figures is not None:
                runs.setdefault(peer, []).append(peer_figures)
    report(result, runs, limit)
    other = "false" if args.coalesce == "true" else "true"
    figures, _ = run_samzapy(tmp, servers, other, result, f"coalesce-{other}")
    result.add(
        f"samzapy window count, changelog.coalesce={other}",
        figures.rate,
        "msg/s",
        limit=limit,
        rss_mb=figures.rss_mb,
        cpu_us=figures.cpu_us,
    )
    restores = []
    for _ in range(args.rounds if "quix" in runs else 1):
        restores.append(("samzapy", *samzapy_restore(config, "main0", tmp, result)))
        if "quix" in runs:
            restores.append(("quix", *quix_restore(servers, args.count, tmp, result, "0")))
    for who in ("samzapy", "quix"):
        mine = [r for r in restores if r[0] == who]
        if mine:
            join = "start-up" if who == "samzapy" else "group join"
            before = _mean([r[1] for r in mine])
            result.add(f"{who} restore run: {join} before restore, s", before, "s")
            result.add(f"{who} restore run: restore, s", _mean([r[2] for r in mine]), "s")


if __name__ == "__main__":
    main()

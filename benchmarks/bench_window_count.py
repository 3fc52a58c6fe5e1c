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
(1, 2, 1, 2, ...), on ``--processes-count`` views (1M at size small), each member stopping at
the end of its input. Two rates: **processing**, from the first member running its tasks to
the last member at the end of its input (what the members do once the group has formed),
and **end to end**, from the command's start to the parent's exit (start-up, the group's
formation, the final commits and the exits included). Beside them the CPU per message of the
whole tree (parent and members, from the first task running to the exit), and, over the
window in which every member was running its tasks, each member's cores on a CPU and waiting
in the run queue for one, the parent's, the dev broker's, and what the rest of the machine
used (:mod:`benchmarks._sched`): on a shared machine a member that is runnable all the time
but gets 0.6 of a core is short of CPU, not waiting on the broker.

    python -m benchmarks.bench_window_count --size full      # 1M views, 100k users
    python -m benchmarks.bench_window_count --count 100000 --users 10000 --peers quix
    python -m benchmarks.bench_window_count --processes 1,2   # every core of a host
    python -m benchmarks.bench_window_count --processes 1,2 --rounds 6 --quiet-wait 120
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks import peers
from benchmarks._common import (
    ROOT,
    Result,
    arguments,
    count_records,
    processed_messages,
    raw_consume,
    run_child,
    samzapy_run,
    write_properties,
)
from benchmarks._sched import PERIOD_S, TreeSampler, wait_until_idle
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker

CONFIG = ROOT / "config" / "pageview-counter.properties"
TOPIC = "bench-views"
PARTITIONS = 4
PEER_TIMEOUT_S = 900
#: A round of ``--processes`` counts as quiet when the rest of the machine (neither the job nor
#: the dev broker) used less than this many cores while the members processed.
QUIET_CORES = 0.25


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


@dataclass
class GroupRun:
    """One ``samzapy run --processes N`` run: rates, CPU, and where its cores went."""

    processes: int
    rate: float  # first task running to the last member at the end of its input
    end_to_end: float  # start to the parent's exit (start-up and group formation included)
    cpu_us: float
    rss_mb: float
    runnable: float  # the members' mean CPU + run-queue wait while all processed, in cores
    others: float  # cores the rest of the machine used meanwhile (not the job, broker or this script)


@dataclass
class _Timeline:
    """When the members' log lines said what (``time.perf_counter`` values)."""

    running: list[float] = field(default_factory=list)  # "running tasks [...]"
    ends: list[float] = field(default_factory=list)  # "every input reached the end offset"
    placements: int = 0  # assignment rounds ("placed N tasks on M members")

    def see(self, line: str, now: float) -> None:
        if "running tasks [" in line:
            self.running.append(now)
        elif "every input reached the end offset" in line:
            self.ends.append(now)
        elif "placed " in line and " tasks on " in line:
            self.placements += 1


def run_processes(
    tmp: Path, servers: str, processes: int, result: Result, tag: str, broker_pid: int
) -> GroupRun:
    """The counter in group mode under ``samzapy run --processes N`` as job ``tag``.

    Notes the round's timeline (group formation, the processing phase, the exit), the CPU
    per message of the whole tree, and, over the window in which every member was running its
    tasks, each member's cores on a CPU and waiting for one, the parent's, the dev broker's,
    and what the rest of the machine used (:mod:`benchmarks._sched`).
    """
    config = samzapy_config(tmp, servers, "true", tag)
    group = {"job.coordinator.factory": "group", "job.coordinator.session.timeout.ms": "6000"}
    config.write_text(config.read_text() + "".join(f"{k}={v}\n" for k, v in group.items()))
    metrics = tmp / f"metrics-{tag}.json"
    command = samzapy_run(config, "--processes", str(processes), "--metrics-file", str(metrics))
    timeline = _Timeline()
    sampler = TreeSampler(others={"broker": broker_pid, "benchmark": os.getpid()})
    try:
        run = run_child(
            command,
            ready_marker="running tasks [",
            tree_cpu=True,
            on_start=sampler.start,
            on_line=timeline.see,
        )
    finally:
        sampler.stop()
    snapshots = [metrics] if processes == 1 else [tmp / f"metrics-{tag}-{i}.json" for i in range(processes)]
    processed = sum(processed_messages(json.loads(path.read_text())) for path in snapshots)
    first, last_end = min(timeline.running), max(timeline.ends)
    # every member running its tasks: from the last "running" line before any member ended
    all_from, all_until = max(t for t in timeline.running if t < min(timeline.ends)), min(timeline.ends)
    window = "While every member ran"
    if all_until - all_from < 3 * PERIOD_S:  # too short to sample (a tiny run): the whole phase
        all_from, all_until, window = first, last_end, "Over the processing phase"
    per, machine = sampler.usage(all_from, all_until)
    members = [pid for pid in sampler.pids() if pid in per][1 if processes > 1 else 0 :]
    ours = sum(per[pid].cpu for pid in per)  # parent, members, broker and this script (its sampler)
    cores = ", ".join(f"{per[pid].cpu:.2f} + {per[pid].runq:.2f}" for pid in members)
    parent = per.get(sampler.root or 0) if processes > 1 else None
    figures = GroupRun(
        processes,
        rate=processed / (last_end - first),
        end_to_end=processed / run.total_s,
        cpu_us=run.busy_cpu_s / max(processed, 1) * 1e6,
        rss_mb=run.rss_mb,
        runnable=sum(per[pid].cpu + per[pid].runq for pid in members) / max(len(members), 1),
        others=max(machine.busy - ours, 0.0),
    )
    started = run.started
    result.note(
        f"samzapy --processes {processes} ({tag}): {processed:,} messages, {timeline.placements} "
        f"assignment round(s); first task running {first - started:.1f} s after start; processing "
        f"{figures.rate:,.0f} msg/s ({first - started:.1f}-{last_end - started:.1f} s: first task "
        f"running to the last member at its end); exit at {run.total_s:.1f} s; end to end "
        f"{figures.end_to_end:,.0f} msg/s; CPU {figures.cpu_us:.1f} us per message (parent and "
        f"members, running to exit). {window} ({all_from - started:.1f}-"
        f"{all_until - started:.1f} s), in cores: members (CPU + waiting for a CPU) {cores}; "
        + (f"parent {parent.cpu:.2f}; " if parent else "")
        + f"broker {per[broker_pid].cpu:.2f}; this script {per[os.getpid()].cpu:.2f}; the rest of the "
        f"machine {figures.others:.2f}; machine busy {machine.busy:.2f} of "
        f"{machine.busy + machine.idle + machine.steal:.2f}"
    )
    return figures


def compare_processes(
    tmp: Path,
    servers: str,
    counts: list[int],
    rounds: int,
    result: Result,
    broker_pid: int,
    quiet_wait_s: float = 0.0,
) -> None:
    """``--processes`` for each of ``counts``, alternating, ``rounds`` times; rows and ratios.

    ``quiet_wait_s``: before each run, wait up to this long for a second in which the
    machine is idle (:func:`benchmarks._sched.wait_until_idle`); the round runs either way.
    """
    runs: dict[int, list[GroupRun]] = {n: [] for n in counts}
    for round_ in range(rounds):
        for n in counts:
            if quiet_wait_s:
                waited, busy = wait_until_idle(QUIET_CORES, quiet_wait_s)
                result.note(f"waited {waited:.0f} s for an idle second (the last: {busy:.2f} cores busy)")
            runs[n].append(run_processes(tmp, servers, n, result, f"p{n}-{round_}", broker_pid))
    for n, figures in runs.items():
        name = f"samzapy window count, group mode, --processes {n}"
        cpu = _mean([f.cpu_us for f in figures])
        rss = max(f.rss_mb for f in figures)
        result.add(f"{name}, processing", _mean([f.rate for f in figures]), "msg/s", rss_mb=rss, cpu_us=cpu)
        result.add(f"{name}, end to end", _mean([f.end_to_end for f in figures]), "msg/s")
        result.add(
            f"--processes {n}: a member's CPU + run-queue wait", _mean([f.runnable for f in figures]), "cores"
        )
        result.add(
            f"--processes {n}: the rest of the machine's CPU", _mean([f.others for f in figures]), "cores"
        )
        each = ", ".join(f"{f.rate:,.0f} ({f.end_to_end:,.0f}) msg/s {f.cpu_us:.1f} us" for f in figures)
        result.note(f"--processes {n}, rounds: processing (end to end) {each}")
    base = runs[counts[0]]
    for n in counts[1:]:
        pairs = list(zip(base, runs[n], strict=True))
        for what, key in (("processing", "rate"), ("end to end", "end_to_end")):
            ratios = [getattr(b, key) / getattr(a, key) for a, b in pairs]
            result.add(f"--processes {n} / --processes {counts[0]}, {what}", _mean(ratios), "x")
            each = ", ".join(f"{r:.2f} x" for r in ratios)
            result.note(f"--processes {n} / {counts[0]}, {what}, rounds: {each}")
        # The rounds in which nothing else competed for the cores: what the job does when it has them.
        quiet = [b.rate / a.rate for a, b in pairs if max(a.others, b.others) < QUIET_CORES]
        if quiet:
            name = f"--processes {n} / --processes {counts[0]}, processing, quiet rounds"
            result.add(name, _mean(quiet), "x")
        result.note(
            f"--processes {n} / {counts[0]}, processing, rounds in which the rest of the machine used "
            f"under {QUIET_CORES} cores in both runs: "
            + (", ".join(f"{r:.2f} x" for r in quiet) if quiet else f"none of {len(pairs)}")
        )


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
        quiet_wait=0.0,
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
                compare_processes(tmp, servers, counts, args.rounds, result, info.pid, args.quiet_wait)
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

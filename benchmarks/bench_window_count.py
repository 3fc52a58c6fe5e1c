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

    python -m benchmarks.bench_window_count --size full      # 1M views, 100k users
    python -m benchmarks.bench_window_count --count 100000 --users 10000 --peers quix
"""

from __future__ import annotations

import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from benchmarks import peers
from benchmarks._common import ROOT, Result, arguments, raw_consume, run_child, samzapy_run, write_properties
from samzapy.config import load_config
from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.reading import read_partition, reader_consumer

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


def count_records(servers: str, topic: str) -> int:
    """Records in every partition of ``topic`` (read to the true end)."""
    consumer = reader_consumer(servers)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        return sum(len(b) for p in partitions for b in read_partition(consumer, TopicPartition(topic, p), 0))
    finally:
        consumer.close()


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


def run_samzapy(
    tmp: Path, servers: str, coalesce: str, result: Result, limit: tuple[str, float], main: bool
) -> tuple[float, Path]:
    """Run the counter to the end of its input; add its rows; its rate and config."""
    tag = "main" if main else f"coalesce-{coalesce}"
    config = samzapy_config(tmp, servers, coalesce, tag)
    metrics = tmp / f"metrics-{tag}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = run_child(samzapy_run(config, "--metrics-file", str(metrics)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the job, reaped by run_child
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    snapshot = json.loads(metrics.read_text())
    processed = sum(
        g.get("messages-actually-processed", 0) for n, g in snapshot.items() if n.startswith("task.")
    )
    puts = sum(g.get("puts", 0) for n, g in snapshot.items() if n.startswith("store."))
    logged = count_records(servers, f"bench-counts-changelog-{tag}")
    outputs = count_records(servers, f"bench-counts-{tag}")
    rate = processed / run.busy_s
    what = "samzapy window count" if main else f"samzapy window count, changelog.coalesce={coalesce}"
    result.add(f"{what}, processing", rate, "msg/s", limit=limit, rss_mb=run.rss_mb)
    if main:
        result.add(f"{what}, whole run", processed / run.total_s, "msg/s", limit=limit)
    result.note(
        f"samzapy (changelog.coalesce={coalesce}): {processed:,} messages, {puts:,} store puts, "
        f"{logged:,} changelog records ({logged / max(processed, 1):.2f} per message), "
        f"{outputs:,} window outputs; start-up {run.ready_s:.1f} s; job CPU {cpu_s:.2f} s "
        f"({cpu_s / max(processed, 1) * 1e6:.1f} us per message, start-up included)"
    )
    return rate, config


def run_peer(
    peer: str, servers: str, count: int, tmp: Path, result: Result, limit: tuple[str, float]
) -> dict:
    """Run ``peer``'s window count; add its rows; return its figures ({} when it cannot run)."""
    try:
        python = peers.python_of(peer)
        script = str(ROOT / "benchmarks" / f"peer_{peer}.py")
        state, group = str(tmp / f"{peer}-state"), f"bench-{peer}"
        args = [str(python), script, servers, TOPIC, str(count), state, group]
        run = run_child(args, ready_marker=None, timeout_s=PEER_TIMEOUT_S)
        figures = json.loads(run.stdout.strip().splitlines()[-1])
    except (RuntimeError, SystemExit, ValueError, IndexError) as exc:
        result.note(f"{peer}: could not run: {exc}")
        return {}
    rate = figures["messages"] / figures["processing_s"]
    result.add(f"{peer} window count, processing", rate, "msg/s", limit=limit, rss_mb=run.rss_mb)
    result.note(f"{peer}: start-up (group join, assignment) {figures['startup_s']:.1f} s")
    figures["rate"] = rate
    if peer == "quix":
        restore = run_child([*args, "--restore"], ready_marker=None, timeout_s=PEER_TIMEOUT_S)
        again = json.loads(restore.stdout.strip().splitlines()[-1])
        # The restore run is start-up (group join) + restore + a 5 s idle timeout.
        figures["restore_s"] = again["total_s"] - 5.0
        result.add("quix restore run (join+restore), s", figures["restore_s"], "s", rss_mb=restore.rss_mb)
    return figures


def main() -> None:
    args = arguments(
        __doc__,
        count=(20_000, 200_000, 1_000_000),
        users=(2_000, 20_000, 100_000),
        peers="quix,faust",
        coalesce="true",
    )
    result = Result("window_count")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            started = time.perf_counter()
            make_topic(servers, args.count, args.users)
            result.note(
                f"{args.count:,} views, {args.users:,} users, {PARTITIONS} partitions, "
                f"produced in {time.perf_counter() - started:.1f} s"
            )
            consumed, consume_s = raw_consume(servers, TOPIC, PARTITIONS, c_decoder=False)
            raw = consumed / consume_s
            limit = ("raw consume", raw)
            result.add("raw kafka-python consume (same topic)", raw, "msg/s", limit=limit)
            c_count, c_s = raw_consume(servers, TOPIC, PARTITIONS, c_decoder=True)
            result.add("consume with samzapy's C batch decoder", c_count / c_s, "msg/s", limit=limit)
            rate, config = run_samzapy(tmp, servers, args.coalesce, result, limit, main=True)
            other = "false" if args.coalesce == "true" else "true"
            run_samzapy(tmp, servers, other, result, limit, main=False)
            shutil.rmtree(tmp / "state-main")
            again = run_child(samzapy_run(config))
            result.add("samzapy restore run (start+restore), s", again.ready_s, "s", rss_mb=again.rss_mb)
            for peer in [p for p in args.peers.split(",") if p]:
                figures = run_peer(peer, servers, args.count, tmp, result, limit)
                if figures:
                    result.add(f"samzapy / {peer}, processing rate", rate / figures["rate"], "x")
                if "restore_s" in figures:
                    result.add(
                        f"{peer} / samzapy, restore run time", figures["restore_s"] / again.ready_s, "x"
                    )
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

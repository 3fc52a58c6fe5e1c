"""Stateless pass-through throughput: the page-view filter job vs raw kafka-python.

Starts its own dev broker, produces N generated page views on 4 partitions, then measures
(a) a raw kafka-python consumer reading them all (the consume limit), (b) a raw kafka-python
producer writing them (the produce limit), and (c) ``samzapy run --exit-at-end`` of the
filter job (consume, deserialise, process, produce, commit), wall clock including start-up
(reported separately). Prints rates and ratios from one run.

    python -m benchmarks.bench_stateless --count 200000
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from kafka import KafkaProducer

from benchmarks._common import Result, arguments, raw_consume, run_child, samzapy_run, write_properties
from samzapy.generate import PageViewSpec, pageviews, produce_json
from samzapy.kafka import broker as dev_broker


def raw_produce(servers: str, topic: str, values: list[bytes]) -> float:
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=5, batch_size=65536)
    started = time.perf_counter()
    for i, value in enumerate(values):
        producer.send(topic, value=value, partition=i % 4)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    return elapsed


def main() -> None:
    args = arguments(__doc__, count=(20_000, 200_000, 500_000))
    result = Result("stateless")
    with tempfile.TemporaryDirectory() as tmp:
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=Path(tmp) / "broker")
        try:
            servers = info.bootstrap_servers
            spec = PageViewSpec(count=args.count, users=10_000, pages=1000)
            produce_json(servers, "bench-in", 4, pageviews(spec))
            raw = raw_consume(servers, "bench-in", 4, c_decoder=False)
            fast = raw_consume(servers, "bench-in", 4, c_decoder=True)
            limit = ("raw consume", raw.rate)
            result.add("raw kafka-python consume", raw.rate, "msg/s", limit=limit, cpu_us=raw.cpu_us)
            result.add(
                "consume with samzapy's C batch decoder", fast.rate, "msg/s", limit=limit, cpu_us=fast.cpu_us
            )
            produce_s = raw_produce(servers, "bench-raw-out", [b"x" * 100] * args.count)
            result.add("raw kafka-python produce (100 B)", args.count / produce_s, "msg/s", limit=limit)
            config = write_properties(
                Path(tmp) / "job.properties",
                {
                    "job.name": "bench-stateless",
                    "task.class": "samzapy.jobs.pageview_filter:PageViewFilterTask",
                    "task.inputs": "kafka.bench-in",
                    "systems.kafka.consumer.bootstrap.servers": servers,
                    "systems.kafka.samza.key.serde": "string",
                    "systems.kafka.samza.msg.serde": "json",
                    "systems.kafka.samza.offset.default": "oldest",
                    "job.logged.store.base.dir": f"{tmp}/state",
                },
            )
            run = run_child(samzapy_run(config))
        finally:
            dev_broker.stop(Path(tmp) / "broker")
    n = args.count
    result.add(
        "samzapy stateless filter, processing",
        n / run.busy_s,
        "msg/s",
        limit=limit,
        rss_mb=run.rss_mb,
        cpu_us=run.busy_cpu_s / n * 1e6,
    )
    result.add("samzapy stateless filter, whole run", n / run.total_s, "msg/s", limit=limit)
    result.note(
        f"stateless: {n:,} messages, 4 partitions; "
        f"samzapy start-up {run.ready_s:.1f} s of {run.total_s:.1f} s"
    )
    result.write(args.result)


if __name__ == "__main__":
    main()

"""Stateless pass-through throughput: the page-view filter job vs raw kafka-python.

Starts its own dev broker, produces N generated page views on 4 partitions, then measures
(a) a raw kafka-python consumer reading them all (the consume limit), (b) a raw kafka-python
producer writing them (the produce limit), and (c) ``samzapy run --exit-at-end`` of the
filter job (consume, deserialise, process, produce, commit), wall clock including start-up
(reported separately). Prints rates and ratios from one run.

    python benchmarks/bench_stateless.py --count 200000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka import KafkaProducer, TopicPartition

from samzapy.generate import PageViewSpec, pageviews, produce_json
from samzapy.kafka import broker as dev_broker
from samzapy.kafka.reading import read_partition, reader_consumer


def raw_consume(servers: str, topic: str) -> tuple[int, float]:
    consumer = reader_consumer(servers)
    started = time.perf_counter()
    count = sum(
        len(batch) for p in range(4) for batch in read_partition(consumer, TopicPartition(topic, p), 0)
    )
    elapsed = time.perf_counter() - started
    consumer.close()
    return count, elapsed


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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=Path(tmp) / "broker")
        try:
            servers = info.bootstrap_servers
            spec = PageViewSpec(count=args.count, users=10_000, pages=1000)
            produce_json(servers, "bench-in", 4, pageviews(spec))
            consumed, consume_s = raw_consume(servers, "bench-in")
            values = [b"x" * 100] * args.count
            produce_s = raw_produce(servers, "bench-raw-out", values)
            config = Path(tmp) / "job.properties"
            config.write_text(
                "job.name=bench-stateless\n"
                "task.class=samzapy.jobs.pageview_filter:PageViewFilterTask\n"
                "task.inputs=kafka.bench-in\n"
                f"systems.kafka.consumer.bootstrap.servers={servers}\n"
                "systems.kafka.samza.key.serde=string\nsystems.kafka.samza.msg.serde=json\n"
                "systems.kafka.samza.offset.default=oldest\n"
                f"job.logged.store.base.dir={tmp}/state\n"
            )
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "samzapy", "run", str(config), "--exit-at-end"],
                check=True,
                capture_output=True,
            )
            job_s = time.perf_counter() - started
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import samzapy.container.run_loop"], check=True)
            import_s = time.perf_counter() - started
        finally:
            dev_broker.stop(Path(tmp) / "broker")
    n = args.count
    rows = [
        ("raw kafka-python consume", consumed / consume_s, 1.0),
        ("raw kafka-python produce (100 B)", n / produce_s, (n / produce_s) / (consumed / consume_s)),
        ("samzapy stateless job, end to end", n / job_s, (n / job_s) / (consumed / consume_s)),
    ]
    print(f"{n} messages, 4 partitions; samzapy process start-up ~{import_s:.2f}s of {job_s:.2f}s")
    print(f"{'what':<40}{'msg/s':>12}{'x consume':>12}")
    for name, rate, ratio in rows:
        print(f"{name:<40}{rate:>12,.0f}{ratio:>12.2f}")


if __name__ == "__main__":
    main()

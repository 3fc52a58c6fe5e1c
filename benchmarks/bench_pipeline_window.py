"""Pipeline overhead: the hourly window count as a task (the pageview-counter job, input read
directly) and as a pipeline (``stream.window(tumbling(hours=1), count(), grace=10 min)`` and a
``map`` to the task's output record), on one topic, interleaved rounds, same store settings.

Both count every view of the topic in a RocksDB store with a changelog (coalesced per commit),
emit every window at the end-of-stream marker and commit; rate over the processing phase and
CPU per message, as :mod:`benchmarks.bench_window_count` measures them.

    python -m benchmarks.bench_pipeline_window --size small
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks._common import Result, arguments, processed_messages, run_child, samzapy_run
from benchmarks.bench_window_count import PARTITIONS, TOPIC, Figures, make_topic, run_samzapy
from samzapy.kafka import broker as dev_broker

APP = """\
import samzapy

app = samzapy.App("pipeline-window-{tag}")
(app.stream("{topic}", timestamp="ts")
    .window(samzapy.tumbling(hours=1), samzapy.count(), grace=samzapy.minutes(10), name="pageview-counts")
    .map(lambda w: {{"user_id": w["key"], "window_start": w["start"],
                     "window_end": w["end"], "count": w["value"]}})
    .to("bench-counts-pipeline-{tag}"))
"""


def run_pipeline(tmp: Path, servers: str, result: Result, tag: str) -> Figures:
    """The pipeline to the end of its input as job ``pipeline-window-<tag>``."""
    app = tmp / f"pipeline_window_{tag}.py"
    app.write_text(APP.format(tag=tag, topic=TOPIC))
    metrics = tmp / f"metrics-pipeline-{tag}.json"
    overrides = {
        "systems.kafka.consumer.bootstrap.servers": servers,
        "job.logged.store.base.dir": f"{tmp}/state-pipeline-{tag}",
        "task.commit.ms": "10000",
        "stores.pageview-counts.object.cache.size": "100000",
        "stores.pageview-counts.write.batch.size": "5000",
    }
    command = samzapy_run(app, "--metrics-file", str(metrics))
    command += [f"--config={k}={v}" for k, v in overrides.items()]
    run = run_child(command)
    processed = processed_messages(json.loads(metrics.read_text()))
    cpu_us = run.busy_cpu_s / max(processed, 1) * 1e6
    rate = processed / run.busy_s
    result.note(f"pipeline {tag}: {processed:,} messages, {rate:,.0f} msg/s, {cpu_us:.1f} us CPU/msg")
    return Figures("pipeline", processed / run.busy_s, cpu_us, run.rss_mb)


def main() -> None:
    args = arguments(__doc__, count=(20_000, 200_000, 1_000_000), users=(2_000, 20_000, 100_000), rounds=2)
    result = Result("pipeline_window")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = dev_broker.start(port=dev_broker.free_port(), state_dir=tmp / "broker")
        try:
            servers = info.bootstrap_servers
            started = time.perf_counter()
            make_topic(servers, args.count, args.users)
            result.note(
                f"{args.count:,} views, {args.users:,} users, {PARTITIONS} partitions, produced in "
                f"{time.perf_counter() - started:.1f} s; {args.rounds} rounds of task, pipeline interleaved"
            )
            tasks, pipes = [], []
            for round_ in range(args.rounds):
                tasks.append(run_samzapy(tmp, servers, "true", result, f"task{round_}")[0])
                pipes.append(run_pipeline(tmp, servers, result, f"{round_}"))
            for who, runs in (("task", tasks), ("pipeline", pipes)):
                rate = sum(f.rate for f in runs) / len(runs)
                cpu = sum(f.cpu_us for f in runs) / len(runs)
                result.add(
                    f"window count as a {who}", rate, "msg/s", rss_mb=max(f.rss_mb for f in runs), cpu_us=cpu
                )
            overhead = sum(p.cpu_us / t.cpu_us for p, t in zip(pipes, tasks, strict=True)) / len(tasks)
            result.add("pipeline / task, CPU per message", overhead, "x")
        finally:
            dev_broker.stop(tmp / "broker")
    result.write(args.result)


if __name__ == "__main__":
    main()

"""The window count (page views per user per hour) with Faust (faust-streaming), for the peer
comparison.

Runs under the Python of ``benchmarks/.peers/faust`` (created by :mod:`benchmarks.peers`):
it imports only faust. The same input topic as samzapy's benchmark (JSON page views keyed by
user_id; the end-of-stream control record is skipped); a one-hour tumbling windowed table
keyed by user_id, relative to the view's ``ts`` (event time), in RocksDB (rocksdict) with its
changelog. Prints one JSON line: messages, seconds from the first message to the last one
processed and the CPU time of the process in between, and the time until the worker stopped.

Configured as a single member should be, and as samzapy is in the benchmark: a 6 s session
with heartbeats every 2 s, and a 10 s commit interval (samzapy's ``task.commit.ms`` there).

    .peers/faust/bin/python peer_faust.py SERVERS TOPIC COUNT STATE_DIR GROUP
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import timedelta

import faust

SERVERS, TOPIC, COUNT, STATE_DIR, GROUP = sys.argv[1:6]
EXPECTED = int(COUNT)
STARTED = time.perf_counter()


class PageView(faust.Record, serializer="json"):
    """A page view as samzapy's generator writes it."""

    user_id: str = ""
    ts: int = 0


app = faust.App(
    GROUP,
    broker=f"kafka://{SERVERS}",
    store="rocksdb://",
    datadir=STATE_DIR,
    topic_partitions=4,
    consumer_auto_offset_reset="earliest",
    broker_commit_interval=10.0,
    broker_session_timeout=6.0,
    broker_heartbeat_interval=2.0,
    web_enabled=False,
)
views = app.topic(TOPIC, value_type=PageView, key_type=str, partitions=4)
counts = (
    app.Table("counts", default=int, partitions=4)
    .tumbling(timedelta(hours=1), expires=timedelta(hours=2))
    .relative_to_field(PageView.ts)
)
seen = {"n": 0, "first": 0.0, "last": 0.0, "first_cpu": 0.0, "last_cpu": 0.0}


@app.agent(views)
async def count(stream):  # noqa: ANN001, ANN201
    async for view in stream:
        if not view.ts:  # samzapy's end-of-stream control record
            continue
        counts[view.user_id] += 1
        n = seen["n"] = seen["n"] + 1
        now, cpu = time.perf_counter(), time.process_time()
        if n == 1:
            seen["first"], seen["first_cpu"] = now, cpu
        seen["last"], seen["last_cpu"] = now, cpu
        if n >= EXPECTED:
            result = {
                "messages": n,
                "startup_s": seen["first"] - STARTED,
                "processing_s": seen["last"] - seen["first"],
                "processing_cpu_s": seen["last_cpu"] - seen["first_cpu"],
                "total_s": time.perf_counter() - STARTED,
            }
            # Faust sends print() to its log; fd 1 is still the real stdout.
            os.write(1, (json.dumps(result) + "\n").encode())
            os._exit(0)  # Faust's graceful stop waits on rebalances; the figures are taken


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.argv = [sys.argv[0], "worker", "--loglevel=warn"]
    app.main()

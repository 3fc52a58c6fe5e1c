"""The window count (page views per user per hour) with Quix Streams, for the peer comparison.

Runs under the Python of ``benchmarks/.peers/quix`` (created by :mod:`benchmarks.peers`), never
under samzapy's: it imports only quixstreams. The same input topic as samzapy's benchmark
(JSON page views keyed by user_id; the end-of-stream control record is skipped), event time
from the view's ``ts``, one-hour tumbling windows with the same 10 minutes of grace, counts
kept in Quix's RocksDB state with its changelog, final window counts produced to an output
topic. Prints one JSON line: messages, seconds from the first message to the last one
processed and the CPU time of the process in between, seconds until the application stopped
(final commit included), and when its state recovery began and ended (from Quix's own log).

Configured as a single member should be, and as samzapy is in the benchmark: a 6 s session
(librdkafka's default of 45 s makes a restarted member wait for its predecessor's session on
the dev broker; 6 s is Kafka's smallest allowed session) with heartbeats every 2 s, and a 10 s
commit interval, samzapy's ``task.commit.ms`` in the benchmark.

    .peers/quix/bin/python peer_quix.py SERVERS TOPIC COUNT STATE_DIR GROUP [--restore]

With ``--restore`` the same group runs again on a wiped state directory with no new input:
Quix rebuilds its window state from the changelog; the time to do so is reported.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from datetime import timedelta

from quixstreams import Application

#: The consumer settings a single member is given (see the module docstring).
CONSUMER = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 2000}


class RecoveryClock(logging.Handler):
    """Times Quix's state recovery from its log records: the first "Beginning recovery check"
    (the group joined, partitions assigned) and the last "Recovery process complete"."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.began = 0.0
        self.ended = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Beginning recovery check") and not self.began:
            self.began = time.perf_counter()
        elif message.startswith("Recovery process complete"):
            self.ended = time.perf_counter()


def build(servers: str, topic: str, state_dir: str, group: str, on_row) -> Application:  # noqa: ANN001
    app = Application(
        broker_address=servers,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        commit_interval=10.0,
        loglevel="WARNING",
        use_changelog_topics=True,
        consumer_extra_config=CONSUMER,
    )
    views = app.topic(
        topic,
        value_deserializer="json",
        key_deserializer="str",
        timestamp_extractor=lambda value, headers, ts, ttype: value.get("ts", ts),
    )
    out = app.topic(f"{topic}-quix-counts-{group}", value_serializer="json", key_serializer="str")
    sdf = app.dataframe(views)
    sdf = sdf.filter(on_row)
    sdf = sdf.tumbling_window(timedelta(hours=1), grace_ms=timedelta(minutes=10)).count().final()
    sdf.to_topic(out)
    return app


def main() -> None:
    servers, topic, count, state_dir, group = sys.argv[1:6]
    expected = int(count)
    restore = "--restore" in sys.argv
    logging.basicConfig(level=logging.WARNING)
    seen = {"n": 0, "first": 0.0, "last": 0.0, "first_cpu": 0.0, "last_cpu": 0.0}
    started = time.perf_counter()
    clock = RecoveryClock()
    app: Application

    def on_row(value: dict) -> bool:
        if "ts" not in value:  # samzapy's end-of-stream control record
            return False
        n = seen["n"] = seen["n"] + 1
        now, cpu = time.perf_counter(), time.process_time()
        if n == 1:
            seen["first"], seen["first_cpu"] = now, cpu
        seen["last"], seen["last_cpu"] = now, cpu
        if n >= expected:
            app.stop()
        return True

    if restore:
        shutil.rmtree(state_dir, ignore_errors=True)
    app = build(servers, topic, state_dir, group, on_row)
    quix_log = logging.getLogger("quixstreams")
    quix_log.addHandler(clock)
    quix_log.setLevel(logging.INFO)  # its own handler stays at WARNING: only the clock sees INFO
    if restore:
        # Nothing new to read: the run is assignment + changelog restore + an idle poll.
        app.run(timeout=5.0)
    else:
        app.run()
    stopped = time.perf_counter()
    result = {
        "messages": seen["n"],
        "startup_s": (seen["first"] or stopped) - started,
        "processing_s": seen["last"] - seen["first"],
        "processing_cpu_s": seen["last_cpu"] - seen["first_cpu"],
        "to_stop_s": stopped - (seen["first"] or started),
        "total_s": stopped - started,
        "join_s": (clock.began or stopped) - started,
        "recovery_s": (clock.ended - clock.began) if clock.ended else None,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

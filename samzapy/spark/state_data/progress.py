"""Progress of a Spark state read.

Records, MB, rate and ETA, as the bulk restore and the state tools report them
(:func:`samzapy.progress.describe`).

The executors count what they read into two Spark accumulators; Spark sends an accumulator's
updates when a task ends, so the figures move one finished store partition at a time (a
partition in progress counts once it is done). The total is the records the changelog
partitions hold (their reported end minus their start: a lower bound on the dev broker,
which undercounts the end by at most a batch); reads from disk have no total, hence no ETA.

Example::

    with SparkProgress(spark, "read_state", total=1_000_000, stream=sys.stderr) as progress:
        reader = SourceReader(..., counters=progress.counters)
        frame.collect()
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, TextIO

from samzapy.progress import describe

log = logging.getLogger(__name__)

#: Seconds between two progress lines.
EVERY_S = 5.0


class SparkProgress:
    """Shows the counts of ``counters`` (records, bytes) while the ``with`` block runs.

    Every :data:`EVERY_S` seconds on ``stream`` (default: the log at INFO), and once at its end.
    """

    def __init__(self, spark: Any, what: str, total: int | None = None, stream: TextIO | None = None) -> None:
        context = spark.sparkContext
        self.counters = (context.accumulator(0), context.accumulator(0))
        self.what, self.total, self.stream = what, total, stream
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="samzapy-spark-progress", daemon=True)
        self.start = time.monotonic()
        self.seconds = 0.0

    @property
    def records(self) -> int:
        """Records counted so far (finished Spark tasks)."""
        return int(self.counters[0].value)

    @property
    def bytes(self) -> int:
        """Key + value bytes counted so far."""
        return int(self.counters[1].value)

    def text(self) -> str:
        """The current progress line (without the leading ``what``)."""
        return describe(self.records, self.bytes, time.monotonic() - self.start, self.total)

    def _show(self) -> None:
        line = f"{self.what}: {self.text()}"
        if self.stream is None:
            log.info("%s", line)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def _run(self) -> None:
        while not self._done.wait(EVERY_S):
            self._show()

    def __enter__(self) -> SparkProgress:
        self.start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.seconds = time.monotonic() - self.start
        self._show()


def planned_records(servers: str, ranges: list[tuple[str, int, int | None]]) -> int:
    """Records in the (topic, partition, stop) ranges.

    From each start to ``stop`` or the reported end (a lower bound on the dev broker).
    """
    from samzapy.kafka.offsets import beginning_offsets, end_offsets
    from samzapy.kafka.reading import reader_consumer
    from samzapy.records import TopicPartition

    tps = [TopicPartition(t, p) for t, p, _ in ranges]
    if not tps:
        return 0
    consumer = reader_consumer(servers)
    try:
        starts, ends = beginning_offsets(consumer, tps), end_offsets(consumer, tps)  # several topics
    finally:
        consumer.close()
    return sum(
        max((stop if stop is not None else ends[tp]) - starts[tp], 0)
        for tp, (_, _, stop) in zip(tps, ranges, strict=True)
    )

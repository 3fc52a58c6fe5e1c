"""The window count as Samza's state docs describe it, for :mod:`benchmarks.bench_naive_window`.

"For each new event the job reads the current count of the user from the store, increments it
and writes it back. When the window completes, the job iterates over the store's contents and
sends the aggregates to the output stream." No operator: a ``hour|user`` key per window, a
read-increment-write per view, and a ``window()`` that scans ``all()``, emits every window the
event time has passed (plus the allowed lateness) and deletes it.

The deleted windows are the smallest keys (the hour comes first), so every later scan starts
over their tombstones: the case the seed warns of ("seekToFirst is very slow if there are many
deletes"). The scan stops at the first window still open, as a user who knows the key order
would write it; the cost left is the tombstones it steps over before it. With
``app.scan=whole-store`` it reads every entry instead, as the docs' words do.
"""

from __future__ import annotations

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream, WindowableTask

HOUR_MS = 3_600_000
LATENESS_MS = 600_000


class NaiveWindowCount(StreamTask, InitableTask, WindowableTask):
    """Views per user per hour of event time: counts in the store, closed windows emitted and
    deleted by a scan of the whole store."""

    def init(self, context):
        self.counts = context.get_store("counts")
        self.out = SystemStream("kafka", context.config["app.output"])
        self.event_time = 0
        self.whole_store = context.config.get("app.scan") == "whole-store"

    def process(self, envelope, collector, coordinator):
        view = envelope.message
        ts = view.get("ts")
        if ts is None:  # the generator's end-of-stream control record
            return
        self.event_time = max(self.event_time, ts)
        key = f"{ts - ts % HOUR_MS:014d}|{view['user_id']}"
        self.counts.put(key, (self.counts.get(key) or 0) + 1)

    def window(self, collector, coordinator):
        closed_before = self.event_time - LATENESS_MS - HOUR_MS
        with self.counts.all() as entries:
            for entry in entries:
                hour = int(entry.key[:14])
                if hour > closed_before:
                    if self.whole_store:
                        continue
                    break
                collector.send(OutgoingMessageEnvelope(self.out, key=entry.key, message=entry.value))
                self.counts.delete(entry.key)

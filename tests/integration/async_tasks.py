"""Async tasks used by the concurrency integration tests (imported by job subprocesses)."""

from __future__ import annotations

import asyncio
import random
import zlib

from samzapy import AsyncStreamTask, InitableTask

#: Messages whose offset hashes below these fractions fail transiently on their first
#: attempt (raise), or time out on it (sleep past task.callback.timeout.ms).
FAIL_FIRST = 0.03
TIME_OUT_FIRST = 0.003


def bucket(partition: int, offset: int) -> float:
    """A stable pseudo-random number in [0, 1) for one message."""
    return zlib.crc32(f"{partition}/{offset}".encode()) / 2**32


class SequenceTask(AsyncStreamTask, InitableTask):
    """Per key, checks that sequence numbers arrive in increasing order and counts them.

    A message is ``{"seq": n}`` or ``{"seq": n, "poison": true}`` (always fails: it ends in
    the dead-letter stream after the retries). Latency is random (0-3 ms); a few messages
    fail or time out on their first attempt and succeed on the retry. The store ``state``
    holds per key ``{"last": seq, "count": n}``, and ``__violations__`` counts messages that
    arrived out of order. Writes happen after the steps that may fail.
    """

    def init(self, context):
        self.state = context.get_store("state")
        self.attempts: dict[int, int] = {}
        self.rng = random.Random(context.partition)

    async def process_async(self, envelope, collector, coordinator):
        offset = envelope.offset
        attempt = self.attempts.get(offset, 0) + 1
        self.attempts[offset] = attempt
        message = envelope.message
        where = bucket(envelope.partition, offset)
        await asyncio.sleep(self.rng.random() * 0.003)
        if message.get("poison"):
            raise ValueError(f"poison message {envelope.key}#{message['seq']}")
        if attempt == 1 and where < TIME_OUT_FIRST:
            await asyncio.sleep(5)  # longer than the timeout: cancelled, then retried
        if attempt == 1 and TIME_OUT_FIRST <= where < FAIL_FIRST:
            raise ConnectionError("transient failure")
        self.attempts.pop(offset, None)
        current = self.state.get(envelope.key) or {"last": -1, "count": 0}
        if message["seq"] <= current["last"]:
            self.state.put("__violations__", (self.state.get("__violations__") or 0) + 1)
        self.state.put(envelope.key, {"last": message["seq"], "count": current["count"] + 1})


class SlowTask(AsyncStreamTask):
    """Takes 5 ms per message: slower than any input."""

    async def process_async(self, envelope, collector, coordinator):
        await asyncio.sleep(0.005)


class AsyncCountingTask(AsyncStreamTask, InitableTask):
    """Counts messages per key in the store ``counts`` after a short random await: a
    read-modify-write, so a replay that double-counts shows (group mode's kill -9 test)."""

    def init(self, context):
        self.counts = context.get_store("counts")
        self.rng = random.Random(context.partition)

    async def process_async(self, envelope, collector, coordinator):
        await asyncio.sleep(self.rng.random() * 0.002)
        key = envelope.key
        self.counts.put(key, (self.counts.get(key) or 0) + 1)

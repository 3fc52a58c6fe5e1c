"""Progress of a long read.

Records, MB, rate and ETA — a bar on a terminal, plain lines otherwise (logs, CI, pipes).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: Seconds between two plain progress lines (no terminal).
LINE_EVERY_S = 5.0
#: Seconds between two redraws of the bar (terminal).
BAR_EVERY_S = 0.1
BAR_WIDTH = 30


def describe(records: int, size: int, elapsed: float, total: int | None) -> str:
    """One progress text.

    >>> describe(50_000, 5_000_000, 2.0, 100_000)
    '50,000/100,000 records (50%), 5.0 MB, 25,000 records/s, 2.5 MB/s, ETA 2s'
    >>> describe(10, 1000, 0.0, None)
    '10 records, 0.0 MB'
    """
    head = (
        f"{records:,}/{total:,} records ({records * 100 // max(total, 1)}%)"
        if total
        else f"{records:,} records"
    )
    text = f"{head}, {size / 1e6:.1f} MB"
    if elapsed <= 0:
        return text
    rate = records / elapsed
    text += f", {rate:,.0f} records/s, {size / 1e6 / elapsed:.1f} MB/s"
    if total and rate > 0:
        text += f", ETA {max(total - records, 0) / rate:.0f}s"
    return text


class Progress:
    """Counts records and bytes against a planned total and shows it on ``stream``.

    The total may shrink while running (:meth:`skip`): a restore that finds a usable local
    checkpoint reads less than planned. Not thread-safe.
    """

    def __init__(self, what: str, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.total = 0
        self.records = 0
        self.bytes = 0
        self.start = time.monotonic()
        self._next = 0.0
        self._started = False

    def begin(self, total: int) -> None:
        """Start counting towards ``total`` records."""
        self.total = total
        self._started = True
        self.start = time.monotonic()
        self._next = self.start + (BAR_EVERY_S if self.tty else LINE_EVERY_S)

    def add(self, records: int, size: int) -> None:
        """Count ``records`` records of ``size`` bytes as done."""
        self.records += records
        self.bytes += size
        now = time.monotonic()
        if now >= self._next:
            self._next = now + (BAR_EVERY_S if self.tty else LINE_EVERY_S)
            self._show(now)

    def skip(self, records: int) -> None:
        """Take ``records`` planned records off the total: they need no reading."""
        self.total = max(self.total - records, self.records)

    def finish(self) -> None:
        """Show the final figures (and end the bar's line); nothing when never begun."""
        if not self._started:
            return
        self._show(time.monotonic())
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _show(self, now: float) -> None:
        text = describe(self.records, self.bytes, now - self.start, self.total or None)
        if not self.tty:
            self.stream.write(f"{self.what}: {text}\n")
        else:
            done = int(BAR_WIDTH * self.records / self.total) if self.total else BAR_WIDTH
            bar = "#" * min(done, BAR_WIDTH) + "-" * max(BAR_WIDTH - done, 0)
            self.stream.write(f"\r{self.what} [{bar}] {text}\x1b[K")
        self.stream.flush()


class NoProgress(Progress):
    """Counts silently (library use)."""

    def __init__(self) -> None:
        super().__init__("", stream=sys.stderr, tty=False)

    def _show(self, now: float) -> None:
        pass

    def finish(self) -> None:
        """Nothing to show."""

"""Tasks that fail, for the error-output tests (imported by job subprocesses)."""

from __future__ import annotations

from samzapy import InitableTask, StreamTask, WindowableTask


class FailsAtOffsetThree(StreamTask):
    """Raises a ValueError (chained to a KeyError) on the message at offset 3."""

    def process(self, envelope, collector, coordinator) -> None:
        if envelope.offset == 3:
            try:
                {}[envelope.message]
            except KeyError as exc:
                raise ValueError(f"no price for {envelope.message!r}") from exc


class FailsInInit(StreamTask, InitableTask):
    """Raises a RuntimeError from init()."""

    def init(self, context) -> None:
        raise RuntimeError("the price table did not load")

    def process(self, envelope, collector, coordinator) -> None:
        pass


class FailsInWindow(StreamTask, WindowableTask):
    """Raises a ZeroDivisionError from a helper that window() calls."""

    def process(self, envelope, collector, coordinator) -> None:
        pass

    def window(self, collector, coordinator) -> None:
        self._rate(0)

    def _rate(self, seconds: int) -> float:
        return 1 / seconds

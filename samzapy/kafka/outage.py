"""Waiting out an unreachable Kafka broker (``task.broker.unavailable.ms``).

A broker restart, a network blip or a paused broker must not fail a container: the commit's
broker calls (the fencing read of the checkpoint topic, the producer flushes that wait for the
changelog, output and checkpoint writes) go through :meth:`BrokerWait.call`, which retries
them with exponential backoff while the broker does not answer, and fails only when the
broker stayed away longer than the configured limit. Meanwhile:

- every attempt logs one WARNING line: ``Kafka broker at H:P unreachable since 12:00:01
  (fencing check: KafkaTimeoutError: ...); retrying in 4 s, giving up at 12:05:01``;
- ``/health`` shows ``broker: unreachable since ...`` (:class:`samzapy.health.ContainerStatus`);
- a stop request (SIGTERM, SIGINT) ends the wait at once with :class:`StoppedDuringOutage`:
  the container then stops *without* a commit (a commit needs the broker). Nothing is lost:
  the state is exactly-once, so the next run restores to the last commit and processes again
  what came after it.

Which errors mean "unreachable": kafka-python's retriable errors (timeouts, connection
errors, no leader), also when wrapped in a :class:`~samzapy.errors.KafkaSystemError`, and a
producer flush that timed out (:class:`~samzapy.kafka.producer.FlushTimeout`). Anything else
(a record too large, an authorization error, sends that failed for good:
:class:`~samzapy.kafka.producer.SendFailed`) is raised at once: waiting would not help. An
error class says which it is with a ``broker_unreachable`` attribute.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from kafka import errors as kafka_errors

from samzapy.errors import KafkaSystemError, SamzapyError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Backoff between attempts: starts here, doubles, never above the maximum.
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 15.0
#: How often a backoff sleep checks for a stop request.
_STOP_CHECK_S = 0.2


class StoppedDuringOutage(SamzapyError):
    """A stop was requested while the broker was unreachable: stop without a commit."""


class BrokerUnavailable(KafkaSystemError):
    """The broker stayed unreachable longer than ``task.broker.unavailable.ms``."""


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) says the broker did not answer.

    >>> is_unreachable(kafka_errors.KafkaTimeoutError("no answer"))
    True
    >>> is_unreachable(kafka_errors.UnknownTopicOrPartitionError()), is_unreachable(ValueError())
    (False, False)
    """
    seen: BaseException | None = error
    while seen is not None:
        explicit = getattr(seen, "broker_unreachable", None)
        if explicit is not None:
            return bool(explicit)
        if isinstance(seen, kafka_errors.RetriableError) and not isinstance(
            seen, kafka_errors.UnknownTopicOrPartitionError
        ):
            return True
        seen = seen.__cause__
    return False


def clock(epoch_s: float) -> str:
    """``HH:MM:SS`` local time of ``epoch_s``, for log lines and ``/health``."""
    return datetime.fromtimestamp(epoch_s).strftime("%H:%M:%S")


class BrokerWait:
    """Retries broker calls while the broker is unreachable, up to a limit per outage.

    An outage starts at the first failed attempt and ends at the next successful call of any
    kind; its length is measured across calls (a fencing read that waited 20 s and a flush
    that waits 20 s more have waited 40 s of the same outage).

    Args:
        address: the bootstrap servers, for messages.
        limit_s: how long one outage is waited out (``task.broker.unavailable.ms`` / 1000).
        stop_requested: returns whether the container was asked to stop.
        on_change: called with the outage's start (epoch seconds) when one begins, and with
            ``None`` when it ends (the container's ``/health`` status).
        sleep: the sleep function (tests pass a fake clock's).
    """

    def __init__(
        self,
        address: str,
        limit_s: float,
        stop_requested: Callable[[], bool],
        on_change: Callable[[float | None], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.address = address
        self.limit_s = limit_s
        self._stop_requested = stop_requested
        self._on_change = on_change or (lambda _since: None)
        self._sleep = sleep
        self.since: float | None = None  # epoch seconds of the outage's first failure
        self._since_monotonic = 0.0
        self._backoff = FIRST_BACKOFF_S

    def call(self, action: Callable[[], T], what: str) -> T:
        """``action()``, retried while the broker is unreachable (see the module docstring).

        Raises:
            StoppedDuringOutage: a stop was requested while waiting.
            BrokerUnavailable: the outage lasted longer than ``limit_s``.
            Exception: whatever ``action`` raised that does not mean "unreachable".
        """
        while True:
            try:
                result = action()
            except Exception as error:
                if not is_unreachable(error):
                    raise
                self._failed(error, what)
                continue
            self._recovered(what)
            return result

    def _failed(self, error: Exception, what: str) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since, self._since_monotonic = time.time(), now
            self._backoff = FIRST_BACKOFF_S
            self._on_change(self.since)
        waited = now - self._since_monotonic
        left = self.limit_s - waited
        cause = f"{type(error).__name__}: {error}"
        if self._stop_requested():
            raise StoppedDuringOutage(self._stop_message(what)) from error
        if left <= 0:
            msg = (
                f"the Kafka broker at {self.address} was unreachable for {waited:.0f} s (since "
                f"{clock(self.since)}) while trying to {what}: {cause}. Nothing since the last commit "
                "is committed; restart the job when the broker is back (raise "
                "task.broker.unavailable.ms to wait longer)"
            )
            raise BrokerUnavailable(msg) from error
        pause = min(self._backoff, left)
        log.warning(
            "Kafka broker at %s unreachable since %s (%s: %s); retrying in %.0f s, giving up at %s "
            "(task.broker.unavailable.ms=%d)",
            self.address, clock(self.since), what, cause, pause,
            clock(self.since + self.limit_s), int(self.limit_s * 1000),
        )  # fmt: skip
        self._pause(pause, what, error)
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)

    def _pause(self, seconds: float, what: str, error: Exception) -> None:
        """Sleep ``seconds``, in short steps that notice a stop request."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self._stop_requested():
                raise StoppedDuringOutage(self._stop_message(what)) from error
            self._sleep(min(_STOP_CHECK_S, left))

    def _stop_message(self, what: str) -> str:
        return (
            f"stop requested while the Kafka broker at {self.address} was unreachable (since "
            f"{clock(self.since or time.time())}, trying to {what}): stopping without a commit; "
            "the next run resumes from the last commit"
        )

    def _recovered(self, what: str) -> None:
        if self.since is None:
            return
        log.info(
            "Kafka broker at %s reachable again after %.1f s (%s succeeded)",
            self.address, time.monotonic() - self._since_monotonic, what,
        )  # fmt: skip
        self.since = None
        self._on_change(None)

"""Topic administration: find, create and check the topics a job needs.

Samza creates the changelog topics of logged stores (compacted, one partition per task) and
checks that existing ones have the right partition count; :class:`TopicAdmin` does the same
over kafka-python's ``KafkaAdminClient``. A broker that does not answer is retried with
exponential backoff (a WARNING each time) until a deadline, then reported as a
``KafkaSystemError`` naming the address.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from kafka import KafkaAdminClient
from kafka import errors as kafka_errors

from samzapy import stopping
from samzapy.errors import KafkaSystemError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long an unreachable broker is retried before giving up, by default.
DEFAULT_DEADLINE_S = 60.0
_FIRST_BACKOFF_S = 0.25
_MAX_BACKOFF_S = 8.0
_UNKNOWN_TOPIC = kafka_errors.UnknownTopicOrPartitionError.errno


def attempt_timeout_ms(deadline_s: float) -> int:
    """How long one connection attempt may take so that several fit in ``deadline_s``."""
    return int(max(0.5, min(deadline_s / 4, 5.0)) * 1000)


def retry_unreachable(
    action: Callable[[], T],
    address: str,
    what: str,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> T:
    """Run ``action``, retrying kafka-python's retriable errors with exponential backoff.

    Each failed attempt logs one WARNING naming ``address`` (kafka-python's own connection
    errors are kept off the log meanwhile, unless it logs at INFO, as with ``-v``); after
    ``deadline_s`` seconds the last error is raised as a ``KafkaSystemError``, and at once,
    between attempts, when a stop was requested (:mod:`samzapy.stopping`: SIGTERM).
    """
    give_up_at = time.monotonic() + deadline_s
    backoff = _FIRST_BACKOFF_S
    attempt = 0
    while True:
        attempt += 1
        try:
            with _quiet_client_logs():
                return action()
        except kafka_errors.RetriableError as exc:
            if isinstance(exc, kafka_errors.UnknownTopicOrPartitionError):
                raise  # "retriable" in Kafka's sense (metadata may be stale), but an answer here
            left = give_up_at - time.monotonic()
            if left <= 0:
                msg = (
                    f"the Kafka broker at {address} did not answer ({what}) for {deadline_s:.0f} s: "
                    f"{exc}. Check that it runs and that bootstrap.servers points at it "
                    "(for the dev broker: samzapy broker start)"
                )
                raise KafkaSystemError(msg) from exc
            pause = min(backoff, left)
            # the first line also says what to do: a broker that is really gone is said once
            # with the fix, then one short line per attempt
            fix = (
                " (check that it runs and that bootstrap.servers points at it; for the dev broker: "
                "samzapy broker start)"
                if attempt == 1
                else ""
            )
            log.warning(
                "Kafka broker at %s unreachable while trying to %s (attempt %d: %s); retrying in "
                "%.2f s, giving up in %.0f s%s",
                address,
                what,
                attempt,
                exc,
                pause,
                left,
                fix,
            )
            if stopping.wait(pause) or stopping.stop_reason():
                plural = "s" if attempt > 1 else ""
                msg = (
                    f"stopped while waiting for the Kafka broker at {address} to {what} (after "
                    f"{attempt} attempt{plural}): {stopping.stop_reason()}"
                )
                raise KafkaSystemError(msg) from exc
            backoff = min(backoff * 2, _MAX_BACKOFF_S)


@contextmanager
def _quiet_client_logs() -> Iterator[None]:
    """Keep kafka-python's per-connection errors off the log during one attempt.

    The retry loop says what happened in one line. With ``-v`` (kafka-python at INFO) they stay.
    """
    client = logging.getLogger("kafka")
    if client.getEffectiveLevel() <= logging.INFO:
        yield
        return
    level = client.level
    client.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        client.setLevel(level)


class TopicAdmin:
    """Creates and inspects topics on one Kafka cluster.

    Use as a context manager, or call :meth:`close`. Not safe for concurrent use from several
    threads: give each thread its own.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        deadline_s: how long an unreachable broker is retried, per operation.
        **overrides: extra ``KafkaAdminClient`` settings.
    """

    def __init__(self, bootstrap_servers: str, *, deadline_s: float = DEFAULT_DEADLINE_S, **overrides: Any):
        self._address = bootstrap_servers
        self._deadline_s = deadline_s
        settings: dict[str, Any] = {
            "bootstrap_servers": bootstrap_servers,
            "client_id": "samzapy-admin",
            "bootstrap_timeout_ms": attempt_timeout_ms(deadline_s),
        }
        settings.update(overrides)
        self._client: KafkaAdminClient = self._retry(lambda: KafkaAdminClient(**settings), "connect")

    def _retry(self, action: Callable[[], T], what: str) -> T:
        return retry_unreachable(action, self._address, what, self._deadline_s)

    def partition_count(self, topic: str) -> int | None:
        """The number of partitions of ``topic``, or ``None`` when it does not exist."""
        (described,) = self._retry(lambda: self._client.describe_topics([topic]), f"describe topic '{topic}'")
        code = described["error_code"]
        if code == _UNKNOWN_TOPIC:
            return None
        if code != 0:
            error = kafka_errors.for_code(code)
            msg = f"cannot describe topic '{topic}' on {self._address}: {error.__name__}"
            raise KafkaSystemError(msg)
        return len(described["partitions"])

    def ensure_topic(
        self,
        topic: str,
        partitions: int,
        *,
        compact: bool = False,
        replication_factor: int = 1,
        expect_partitions: int | None = None,
    ) -> int:
        """Create ``topic`` unless it exists; return its partition count.

        A new topic gets ``partitions`` partitions and ``cleanup.policy=compact`` when
        ``compact``. Another process creating it at the same time is fine. An existing topic
        is left as it is, but when ``expect_partitions`` is given and differs from its
        partition count, ``KafkaSystemError`` says so (a changelog must have one partition
        per task).
        """
        count = self.partition_count(topic)
        if count is None:
            count = self._create(topic, partitions, compact, replication_factor)
        if expect_partitions is not None and count != expect_partitions:
            msg = (
                f"topic '{topic}' on {self._address} has {count} partitions but {expect_partitions} "
                f"are expected (one per task). Delete the topic so that samzapy recreates it "
                f"(its data is lost unless copied first), or add partitions with kafka-topics.sh "
                f"--alter --topic {topic} --partitions {expect_partitions} if it has fewer"
            )
            raise KafkaSystemError(msg)
        return count

    def _create(self, topic: str, partitions: int, compact: bool, replication_factor: int) -> int:
        spec: dict[str, Any] = {"num_partitions": partitions, "replication_factor": replication_factor}
        if compact:
            spec["configs"] = {"cleanup.policy": "compact"}
        try:
            self._retry(
                lambda: self._client.create_topics({topic: spec}, wait_for_metadata=True),
                f"create topic '{topic}'",
            )
        except kafka_errors.TopicAlreadyExistsError:
            log.debug("topic '%s' was created by someone else meanwhile", topic)
        except kafka_errors.KafkaError as exc:
            msg = f"cannot create topic '{topic}' ({partitions} partitions) on {self._address}: {exc}"
            raise KafkaSystemError(msg) from exc
        else:
            log.info(
                "created topic '%s' with %d partitions%s",
                topic,
                partitions,
                " (compacted)" if compact else "",
            )
        count = self.partition_count(topic)
        if count is None:
            msg = f"topic '{topic}' on {self._address} was created but cannot be found"
            raise KafkaSystemError(msg)
        return count

    def delete_topic(self, topic: str) -> bool:
        """Delete ``topic``; ``False`` when it did not exist."""
        try:
            self._retry(lambda: self._client.delete_topics([topic]), f"delete topic '{topic}'")
        except kafka_errors.UnknownTopicOrPartitionError:
            return False
        except kafka_errors.KafkaError as exc:
            msg = f"cannot delete topic '{topic}' on {self._address}: {exc}"
            raise KafkaSystemError(msg) from exc
        return True

    def close(self) -> None:
        """Close the connections to the broker."""
        self._client.close()

    def __enter__(self) -> TopicAdmin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

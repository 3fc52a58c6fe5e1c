"""Asking the broker for the first or next offsets of several partitions at once, robustly.

Why this exists (issue 28 item 0): kafka-python 3.0's ``beginning_offsets`` and
``end_offsets`` raise a bare ``KeyError: TopicPartition(...)`` when the client's metadata
knows the leader of some of the partitions asked but not of the others. Its fetcher groups
the partitions by leader, silently leaves out those without a known leader (it only asks
for a metadata refresh of their topics), sends the rest, and treats the answer as complete;
``beginning_or_end_offset`` then indexes the answer with every partition asked. (When *no*
partition has a known leader it raises a retriable ``StaleMetadata`` and retries itself, so
one topic at a time never fails this way.)

How the metadata loses a topic: ``KafkaConsumer.assign(partitions)`` replaces the set of
topics the client tracks with the assigned ones and requests a metadata refresh; when that
answer arrives (asynchronously, on the client's network thread) the client forgets every
other topic. The container's start-up reads the last batch of each input partition with
``assign([tp])`` one partition at a time (:func:`samzapy.kafka.reading.true_end_offsets`),
then asks the first offsets of all input partitions: if the metadata answer for the last
``assign`` landed in between (more likely under load), the other topics were unknown and the
start failed. Reproduced deterministically by sleeping 1 s between the two calls.

:func:`beginning_offsets` and :func:`end_offsets` here ask kafka-python, and when it answers
without some partitions (the ``KeyError``) or times out, they refresh the metadata of every
topic (which also waits for a refresh in flight), back off and ask again, up to a bounded
wait (the consumer's ``request_timeout_ms`` by default); then they raise a
:class:`~samzapy.errors.KafkaSystemError` naming the partitions that got no answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka import TopicPartition
from kafka import errors as kafka_errors

from samzapy.errors import KafkaSystemError

log = logging.getLogger(__name__)

#: First pause between two asks; it doubles up to :data:`MAX_BACKOFF_S`.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

_Ask = Callable[..., dict[TopicPartition, int]]


def beginning_offsets(
    consumer: Any, partitions: Iterable[TopicPartition], *, timeout_s: float | None = None
) -> dict[TopicPartition, int]:
    """The first offset of each of ``partitions`` (every one of them is a key of the answer).

    Raises:
        KafkaSystemError: some partitions got no answer within ``timeout_s`` (default: the
            consumer's ``request_timeout_ms``); the message names them and the last error.
    """
    return _list_offsets(consumer, partitions, consumer.beginning_offsets, "first", timeout_s)


def end_offsets(
    consumer: Any, partitions: Iterable[TopicPartition], *, timeout_s: float | None = None
) -> dict[TopicPartition, int]:
    """The broker's reported end offset of each of ``partitions``.

    The broker's reported end offset of each of ``partitions`` (a lower bound of the true end on
    the dev broker, see :mod:`samzapy.kafka.reading`); as :func:`beginning_offsets`.
    """
    return _list_offsets(consumer, partitions, consumer.end_offsets, "end", timeout_s)


def _list_offsets(
    consumer: Any, partitions: Iterable[TopicPartition], ask: _Ask, what: str, timeout_s: float | None
) -> dict[TopicPartition, int]:
    wanted = list(dict.fromkeys(partitions))
    if not wanted:
        return {}
    if timeout_s is None:
        timeout_s = consumer.config["request_timeout_ms"] / 1000
    deadline = time.monotonic() + timeout_s
    backoff, attempts = FIRST_BACKOFF_S, 0
    while True:
        attempts += 1
        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            answer = ask(wanted, timeout_ms=remaining_ms)
        except KeyError as exc:  # a partition whose leader the metadata did not know (module doc)
            missed = exc.args[0] if exc.args else None
            problem = f"no answer for {_name(missed) if isinstance(missed, tuple) else missed}"
            cause: BaseException | None = exc
        except (kafka_errors.KafkaTimeoutError, kafka_errors.RetriableError) as exc:
            problem, cause = f"{type(exc).__name__}: {exc}", exc  # kafka-python waited its share
        else:
            missing = [tp for tp in wanted if tp not in answer]
            if not missing:
                return {tp: answer[tp] for tp in wanted}
            problem, cause = f"no answer for {', '.join(map(_name, missing))}", None
        if time.monotonic() + backoff >= deadline:
            raise _gave_up(wanted, what, timeout_s, attempts, problem) from cause
        log.debug("%s offsets of %s: %s; asking again in %.2f s", what, _names(wanted), problem, backoff)
        time.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_S)
        _refresh_metadata(consumer)


def _refresh_metadata(consumer: Any) -> None:
    """Fetch the metadata of every topic.

    Kafka-python waits for a refresh in flight first, so a late answer for fewer topics cannot
    overwrite this one.
    """
    try:
        consumer.topics()
    except kafka_errors.KafkaError as exc:  # the next ask reports what is wrong, or retries
        log.debug("metadata refresh failed: %s", exc)


def _gave_up(
    wanted: list[TopicPartition], what: str, timeout_s: float, attempts: int, problem: str
) -> KafkaSystemError:
    msg = (
        f"could not learn the {what} offsets of {_names(wanted)} within {timeout_s:g} s "
        f"({attempts} attempts; last: {problem}); check that these topics exist with these "
        f"partitions and that the broker is reachable"
    )
    return KafkaSystemError(msg)


def _name(tp: tuple[str, int]) -> str:
    topic, partition = tp  # kafka-python's and samzapy's TopicPartition are both (topic, partition)
    return f"{topic}.{partition}"


def _names(tps: list[TopicPartition]) -> str:
    """``a.0, a.1, b.0`` (at most 10 named, then how many more)."""
    shown = ", ".join(map(_name, tps[:10]))
    return shown if len(tps) <= 10 else f"{shown} and {len(tps) - 10} more"

"""Waiting out an unreachable broker (issue 21 item 5): retries with backoff and a log line
per attempt, a limit, and a stop request honoured meanwhile. No broker: the broker calls are
functions that fail as kafka-python fails while the broker does not answer."""

from __future__ import annotations

import logging

import pytest
from kafka import errors as kafka_errors

from samzapy.errors import KafkaSystemError
from samzapy.health import ContainerStatus
from samzapy.kafka import outage
from samzapy.kafka.outage import BrokerUnavailable, BrokerWait, StoppedDuringOutage, is_unreachable
from samzapy.kafka.producer import FlushTimeout, SendFailed


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outage, "FIRST_BACKOFF_S", 0.01)
    monkeypatch.setattr(outage, "MAX_BACKOFF_S", 0.04)


def failing(times: int, error: Exception, result: str = "done"):
    calls = []

    def action() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return result

    return action, calls


def test_an_outage_is_waited_out_with_a_line_per_attempt(caplog: pytest.LogCaptureFixture) -> None:
    status = ContainerStatus()
    seen: list[float | None] = []

    def on_change(since: float | None) -> None:
        seen.append(since)
        status.broker_unreachable(since)

    wait = BrokerWait("127.0.0.1:9", 30.0, lambda: False, on_change)
    action, calls = failing(3, kafka_errors.KafkaTimeoutError("Timeout waiting for future"))
    with caplog.at_level(logging.INFO, logger="samzapy.kafka.outage"):
        assert wait.call(action, "read the checkpoint topic (fencing check)") == "done"
    assert len(calls) == 4
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4
    for line in lines[:3]:
        assert line.startswith("Kafka broker at 127.0.0.1:9 unreachable since ")
        assert "(read the checkpoint topic (fencing check): KafkaTimeoutError: " in line
        assert "task.broker.unavailable.ms=30000" in line
    assert lines[3].startswith("Kafka broker at 127.0.0.1:9 reachable again after ")
    assert len(seen) == 2 and seen[0] is not None and seen[1] is None
    assert "broker" not in status.snapshot()


def test_health_shows_the_outage_while_it_lasts() -> None:
    status = ContainerStatus()
    observed: list[str] = []

    def action() -> str:
        observed.append(status.snapshot().get("broker", ""))
        if len(observed) < 2:
            raise kafka_errors.KafkaConnectionError("Connection reset")
        return "ok"

    BrokerWait("b:1", 30.0, lambda: False, status.broker_unreachable).call(action, "flush")
    assert observed[0] == ""
    assert observed[1].startswith("unreachable since ")
    assert "broker" not in status.snapshot()


def test_errors_that_waiting_cannot_fix_are_raised_at_once() -> None:
    wait = BrokerWait("b:1", 30.0, lambda: False)
    for error in (
        SendFailed("3 record(s) sent to b:1 were not written"),
        KafkaSystemError("record too large"),
        kafka_errors.UnknownTopicOrPartitionError(),
        ValueError("bad"),
    ):
        action, calls = failing(1, error)
        with pytest.raises(type(error)):
            wait.call(action, "flush")
        assert calls == [1]


def test_what_counts_as_unreachable() -> None:
    wrapped = KafkaSystemError("cannot find topic 'x'")
    wrapped.__cause__ = kafka_errors.KafkaTimeoutError()
    assert is_unreachable(wrapped)
    assert is_unreachable(FlushTimeout("12 records sent to b:1 were not acknowledged within 15.0 s"))
    expired = SendFailed("1 record(s) sent to b:1 were not written")
    expired.__cause__ = kafka_errors.KafkaTimeoutError("Expiring 1 record(s)")
    assert not is_unreachable(expired)  # the records are gone: waiting does not bring them back


def test_the_limit_ends_the_wait_with_an_error_that_says_what_to_do() -> None:
    wait = BrokerWait("127.0.0.1:9", 0.05, lambda: False)
    action, calls = failing(10**6, kafka_errors.KafkaTimeoutError("Timeout waiting for future"))
    with pytest.raises(BrokerUnavailable) as raised:
        wait.call(action, "write the checkpoints")
    text = str(raised.value)
    assert text.startswith("the Kafka broker at 127.0.0.1:9 was unreachable for 0 s (since ")
    assert "while trying to write the checkpoints: KafkaTimeoutError" in text
    assert "raise task.broker.unavailable.ms to wait longer" in text
    assert len(calls) >= 2


def test_a_stop_request_ends_the_wait_without_a_commit() -> None:
    stop = []
    wait = BrokerWait("127.0.0.1:9", 60.0, lambda: bool(stop))

    def action() -> str:
        stop.append(True)  # SIGTERM arrives during the first attempt
        raise kafka_errors.KafkaTimeoutError("Timeout waiting for future")

    with pytest.raises(StoppedDuringOutage, match="stopping without a commit"):
        wait.call(action, "flush")
    assert len(stop) == 1


def test_the_doctests_pass() -> None:
    import doctest

    result = doctest.testmod(outage)
    assert result.failed == 0 and result.attempted > 0

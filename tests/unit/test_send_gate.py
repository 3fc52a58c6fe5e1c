"""The send gate's decisions (issue 28 item 3), with a fence whose answers the test sets: the
gate checks only when its lease ran out, shuts for good on a takeover, and lets sends go on
while the broker does not answer (the commit waits the outage out). The gate on the broker:
tests/integration/test_fencing_claims.py."""

from __future__ import annotations

import time

import pytest
from kafka import errors as kafka_errors

from samzapy.container.fencing import ContainerFenced, SendGate


class Fence:
    """Answers ``taken_over`` with what the test put in ``answers`` (an exception is raised)."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.gate = None

    def taken_over(self) -> dict[str, int]:
        self.asked += 1
        answer = self.answers.pop(0) if self.answers else {}
        if isinstance(answer, BaseException):
            raise answer
        self.gate.renew(time.monotonic())  # as Fence._read does after a read
        return answer  # type: ignore[return-value]

    def owners(self, taken: dict[str, int]) -> dict[str, tuple[int, str | None]]:
        return {name: (generation, "host:1:new") for name, generation in taken.items()}


def test_a_check_that_passes_opens_the_gate_for_a_lease() -> None:
    fence = Fence({})
    gate = SendGate(fence, lease_s=60)  # type: ignore[arg-type]
    assert gate.open_until == 0.0  # the first send checks
    gate.check()
    assert gate.open_until > time.monotonic() + 59
    assert fence.asked == 1


def test_a_takeover_shuts_the_gate_for_good_naming_task_and_owner() -> None:
    fence = Fence({"Partition 1": 3})
    gate = SendGate(fence, lease_s=60)  # type: ignore[arg-type]
    with pytest.raises(ContainerFenced) as first:
        gate.check()
    with pytest.raises(ContainerFenced) as again:
        gate.check()
    assert first.value is again.value and fence.asked == 1
    assert gate.open_until == 0.0  # every later send comes to check() and raises
    assert "Partition 1 by host:1:new (generation 3)" in str(first.value)


def test_an_unreachable_broker_lets_sends_go_on_and_asks_again_after_a_lease() -> None:
    fence = Fence(kafka_errors.KafkaTimeoutError("no answer"), {"Partition 0": 2})
    gate = SendGate(fence, lease_s=0.05)  # type: ignore[arg-type]
    gate.check()  # no exception: the send goes on
    assert gate.error is None and gate.open_until > time.monotonic()
    time.sleep(0.06)
    with pytest.raises(ContainerFenced):
        gate.check()


def test_other_errors_of_the_check_are_raised() -> None:
    gate = SendGate(Fence(kafka_errors.TopicAuthorizationFailedError()), lease_s=1)  # type: ignore[arg-type]
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        gate.check()

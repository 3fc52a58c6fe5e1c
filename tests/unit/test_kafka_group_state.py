"""Group mode reads kafka-python's coordinator state (samzapy.kafka.group_state).

These internals are pinned (pyproject.toml, kafka-python 3.0.x): on another client this test
fails, loudly, as group mode refuses to start.
"""

from __future__ import annotations

import socket

from kafka import KafkaConsumer

from samzapy.kafka import group_state


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_installed_kafka_python_has_the_coordinator_state_group_mode_reads():
    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{unused_port()}",
        group_id="g",
        api_version=(2, 5),
        session_timeout_ms=6000,
    )
    try:
        consumer.subscribe(["pageviews"])
        state = group_state.coordinator_state(consumer)
        assert state.joined() is False
        assert state.rebalancing() is False
        assert state.stable_generation() is None
        assert state.rejoin_needed() is True
        assert 0 <= state.seconds_since_answer() < 60
        assert state.sleep(0.01) is not None  # awaited by the async rebalance listener
        state.allow_listener_time(9.5)
        assert consumer._coordinator._REBALANCE_LISTENER_WARN_SECS == 9.5
    finally:
        consumer.close()
    assert "kafka-python 3.0." in group_state.describe()


def test_a_client_without_that_state_is_refused_with_the_fix():
    class OtherClient:
        _coordinator = object()

    try:
        group_state.coordinator_state(OtherClient())
    except group_state.ClientInternalsMissing as error:
        assert "checked against kafka-python 3.0.x" in str(error)
        assert "job.coordinator.factory=passthrough" in str(error)
    else:
        raise AssertionError("a client without the coordinator state was accepted")

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


def _joined_between_polls(broker: str, topic: str, mend: bool) -> tuple[int | None, object]:
    """Start a member's join with a short poll, let the join finish while nobody polls, poll once.

    The dev broker holds a JoinGroup half a session timeout (1 s here), so the first 50 ms poll
    returns with the join still in flight, and it finishes (JoinGroup and SyncGroup) before the
    next poll. Returns the member's stable generation right after that next 50 ms poll, and its
    assignment.
    """
    from support import create_topic, wait_for

    create_topic(broker, topic, 2)
    consumer = KafkaConsumer(
        bootstrap_servers=broker,
        group_id=f"{topic}-group",
        session_timeout_ms=2000,
        heartbeat_interval_ms=400,
        enable_auto_commit=False,
    )
    try:
        consumer.subscribe([topic])
        state = group_state.coordinator_state(consumer)
        if mend:
            group_state.keep_finished_joins(consumer)
        while consumer._coordinator._join_task is None:  # the join is sent by a poll
            consumer.poll(timeout_ms=50)
        wait_for(lambda: consumer._coordinator._join_task.is_done, 30, what="the join to finish")
        consumer.poll(timeout_ms=50)
        return state.stable_generation(), set(consumer.assignment())
    finally:
        consumer.close(autocommit=False)


def test_a_join_that_finished_between_two_polls_is_completed_not_thrown_away(broker, topic_name):
    generation, assignment = _joined_between_polls(broker, topic_name, mend=True)
    assert generation is not None
    assert {tp.partition for tp in assignment} == {0, 1}


def test_the_pinned_kafka_python_throws_such_a_join_away_without_the_mend(broker, topic_name):
    # The fault keep_finished_joins() mends: the poll after the join finished sent a new
    # JoinGroup instead of taking the assignment. When a kafka-python release fixes it, this
    # fails, and the mend can go.
    generation, assignment = _joined_between_polls(broker, topic_name, mend=False)
    assert generation is None
    assert assignment == set()

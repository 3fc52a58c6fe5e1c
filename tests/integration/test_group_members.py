"""Group mode (issue 15): members of one consumer group share the tasks and move them on join,
leave and crash, with their state exact.

Real dev broker, RocksDB stores, member subprocesses (SIGKILL, SIGTERM, SIGSTOP).
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from group_support import (
    PARTITIONS,
    KeyedProducer,
    MetricsSampler,
    checkpointed_total,
    claimants_by_generation,
    generations_seen,
    member_config,
    produce_keyed,
    running_tasks,
)
from kafka import KafkaAdminClient, TopicPartition
from support import changelog_counts, create_topic, kill9, start_job, wait_for

from samzapy.checkpoint import read_checkpoints
from samzapy.config import Config, parse_job_config
from samzapy.coordinator.assignor import LocalState
from samzapy.coordinator.group import GroupMembership, rebalance_timeout_ms
from samzapy.kafka.broker import free_port
from samzapy.kafka.partitioner import partition_for_key
from samzapy.query import StateClient, StateQueryError

pytestmark = pytest.mark.integration


def test_two_members_share_the_tasks_and_count_exactly(tmp_path, broker):
    name = "group-two"
    create_topic(broker, f"{name}-in", PARTITIONS)
    expected = produce_keyed(broker, f"{name}-in", 20_000, 500, seed=1)
    configs = [member_config(tmp_path, broker, name, m) for m in ("a", "b")]
    logs = [tmp_path / f"{m}.log" for m in ("a", "b")]
    members = [start_job(c, "--exit-at-end", log=log) for c, log in zip(configs, logs, strict=True)]
    try:
        codes = [m.wait(timeout=180) for m in members]
    finally:
        for m in members:
            if m.poll() is None:
                kill9(m)
    assert codes == [0, 0], logs[0].read_text()[-3000:] + logs[1].read_text()[-3000:]
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)
    committed = _group_offsets(broker, f"samzapy-{name}-1")  # every message consumed, no lag
    checkpointed = {
        ssp.partition: offset
        for c in read_checkpoints(broker, f"__samza_checkpoint_ver_1_for_{name}_1").values()
        for ssp, offset in c.input_offsets.items()
    }
    assert sum(checkpointed.values()) == 20_000
    assert committed == checkpointed


def test_members_crash_join_and_leave_under_load_and_counts_stay_exact(tmp_path, broker):
    name = "group-three"
    topic = f"{name}-in"
    create_topic(broker, topic, PARTITIONS)
    checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"
    members: dict[str, subprocess.Popen] = {}
    logs = {m: tmp_path / f"{m}.log" for m in "abcd"}

    def start(member: str) -> None:
        config = member_config(tmp_path, broker, name, member)
        metrics = str(tmp_path / f"{member}.json")
        members[member] = start_job(config, "--metrics-file", metrics, log=logs[member])

    def cover(names: str) -> bool:
        held = [running_tasks(logs[m]) for m in names]
        return sorted(t for tasks in held for t in tasks) == list(range(PARTITIONS))

    producer = KeyedProducer(broker, topic, keys=300, rate=2000, seed=7)
    try:
        for member in "abc":
            start(member)
        wait_for(lambda: cover("abc") and all(running_tasks(logs[m]) for m in "abc"), 90, what="a, b, c")
        sampler = MetricsSampler(tmp_path / "a.json")
        kill9(members["b"])
        wait_for(lambda: cover("ac"), 90, what="a and c to take b's tasks after its kill -9")
        start("d")
        wait_for(lambda: cover("acd") and running_tasks(logs["d"]), 90, what="d to take its share")
        members["c"].send_signal(signal.SIGTERM)
        assert members["c"].wait(timeout=60) == 0
        wait_for(lambda: cover("ad"), 90, what="a and d to take c's tasks after its SIGTERM")
        expected = producer.stop()
        total = sum(expected.values())

        wait_for(
            lambda: checkpointed_total(broker, checkpoint_topic) == total,
            120,
            what="a and d to process every message",
        )
        for member in "ad":
            members[member].send_signal(signal.SIGTERM)
        assert [members[m].wait(timeout=60) for m in "ad"] == [0, 0]
    finally:
        producer.stop() if not producer._stop.is_set() else None
        for process in members.values():
            if process.poll() is None:
                kill9(process)

    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)
    doubled = {k: v for k, v in claimants_by_generation(broker, checkpoint_topic).items() if len(v) > 1}
    assert doubled == {}  # never two members committing one task in one generation
    during = sampler.processed_while_set()
    print(f"member a processed {during} messages while rebalances were in progress")
    assert during > 0


def test_a_static_member_restarted_within_the_session_gets_its_tasks_back(tmp_path, broker):
    name = "group-static"
    create_topic(broker, f"{name}-in", PARTITIONS)
    expected = produce_keyed(broker, f"{name}-in", 4_000, 200, seed=3)
    extra = {"job.coordinator.session.timeout.ms": "30000"}
    configs = {m: member_config(tmp_path, broker, name, m, **extra) for m in "ab"}
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    members = {m: start_job(configs[m], "--instance-id", f"member-{m}", log=logs[m]) for m in "ab"}
    try:
        wait_for(lambda: all(running_tasks(logs[m]) for m in "ab"), 90, what="a and b to run their tasks")
        before = {m: running_tasks(logs[m]) for m in "ab"}
        generations_of_a = generations_seen(logs["a"])
        kill9(members["b"])
        restarted = tmp_path / "b-again.log"
        members["b"] = start_job(configs["b"], "--instance-id", "member-b", log=restarted)
        wait_for(lambda: running_tasks(restarted), 60, what="b to run tasks again")
        time.sleep(3)  # a rebalance, had there been one, would reach a now
        assert running_tasks(restarted) == before["b"]
        assert running_tasks(logs["a"]) == before["a"]
        assert generations_seen(logs["a"]) == generations_of_a  # nobody else rebalanced
        more = produce_keyed(broker, f"{name}-in", 4_000, 200, seed=4)
        expected += more
        checkpoint_topic = f"__samza_checkpoint_ver_1_for_{name}_1"
        wait_for(
            lambda: checkpointed_total(broker, checkpoint_topic) == 8_000,
            60,
            what="both members to process everything",
        )
    finally:
        for process in members.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in members.values():
            if process.wait(timeout=60) is None:
                kill9(process)
    counts, _ = changelog_counts(broker, f"{name}-counts-changelog")
    assert counts == dict(expected)


def test_a_member_answers_queries_for_the_other_members_tasks_through_the_assignment(tmp_path, broker):
    name = "group-query"
    create_topic(broker, f"{name}-in", PARTITIONS)
    ports = {m: free_port() for m in "ab"}
    logs = {m: tmp_path / f"{m}.log" for m in "ab"}
    members = {
        m: start_job(
            member_config(tmp_path, broker, name, m, **{"job.query.port": str(ports[m])}), log=logs[m]
        )
        for m in "ab"
    }
    expected = produce_keyed(broker, f"{name}-in", 3_000, 300, seed=5)
    at_a = StateClient(f"http://127.0.0.1:{ports['a']}")

    def everything_counted() -> bool:
        try:
            return dict(at_a.range("counts", limit=1000)) == dict(expected)
        except StateQueryError:  # a task restoring, or an assignment without b's address yet
            return False

    try:
        wait_for(lambda: running_tasks(logs["a"]) and running_tasks(logs["b"]), 90, what="a and b to share")
        wait_for(everything_counted, 90, what="a range over both members to show every count")
        b_tasks = running_tasks(logs["b"])
        key = next(k for k in sorted(expected) if partition_for_key(k.encode(), PARTITIONS) in b_tasks)
        answer = at_a.lookup("counts", key)
        assert answer["value"] == expected[key]
        assert "via" in answer  # a did not run that task: it forwarded the lookup to b
    finally:
        for process in members.values():
            process.send_signal(signal.SIGTERM)
        assert [members[m].wait(timeout=60) for m in "ab"] == [0, 0]


def test_a_member_waits_for_a_join_answer_a_few_sessions_not_ten_minutes(broker):
    """The rebalance timeout (kafka-python's max_poll_interval_ms) also bounds how long a member
    waits for its JoinGroup answer (plus 5 s): a few session timeouts."""
    job = parse_job_config(
        Config.from_dict(
            {
                "job.name": "members",
                "task.class": "samzapy.task:StreamTask",
                "task.inputs": "kafka.pageviews",
                "job.coordinator.factory": "group",
                "job.coordinator.session.timeout.ms": "6000",
                "systems.kafka.consumer.bootstrap.servers": broker,
            }
        )
    )
    member = GroupMembership(job, broker, ["pageviews"], lambda: LocalState())
    member.start()
    try:
        assert member._consumer.config["max_poll_interval_ms"] == 18_000
    finally:
        member.close()
    assert rebalance_timeout_ms(1_000) == 15_000
    assert rebalance_timeout_ms(45_000) == 135_000


def _group_offsets(broker: str, group: str) -> dict[int, int]:
    """The input offsets committed to ``group``, by partition: what kafka-consumer-groups,
    Burrow and KEDA read."""
    admin = KafkaAdminClient(bootstrap_servers=broker)
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: o.offset for tp, o in committed.items()}


def _placed(member: GroupMembership) -> bool:
    """Whether ``member`` is in a stable generation with an assignment."""
    return member.generation is not None and member.assignor.assignment is not None


def _two_members(broker: str, name: str) -> tuple[str, GroupMembership, GroupMembership]:
    """The input topic (4 partitions) of a group-mode job ``name`` (6 s sessions) and two
    memberships of its group, not started."""
    topic = f"{name}-in"
    create_topic(broker, topic, 4)
    job = parse_job_config(
        Config.from_dict(
            {
                "job.name": name,
                "task.class": "samzapy.task:StreamTask",
                "task.inputs": f"kafka.{topic}",
                "job.coordinator.factory": "group",
                "job.coordinator.session.timeout.ms": "6000",
                "systems.kafka.consumer.bootstrap.servers": broker,
            }
        )
    )
    first, second = (GroupMembership(job, broker, [topic], LocalState) for _ in range(2))
    return topic, first, second


def test_a_leader_that_stops_while_a_round_forms_does_not_strand_the_round(broker):
    """The leader stops right after another member's join opened a round. On the dev broker a
    leader that leaves then stays the round's leader and the round never completes (the other
    member waited in it for good, its tasks unowned); the leader does not leave, so the broker
    drops it at its session timeout and the member left completes the round and runs every task."""
    _, leader, other = _two_members(broker, "leader-stops")
    try:
        leader.start()
        wait_for(lambda: _placed(leader), 30, what="a leader")
        other.start()
        wait_for(lambda: other.member_id is not None, 30, what="the other member's join")  # the round forms
        leader.close()
        wait_for(
            lambda: _placed(other), 60, what="the other member to complete the round the leader stopped in"
        )
        assert sorted(other.assignor.assignment.actives) == [0, 1, 2, 3]
    finally:
        leader.close()
        other.close()


def test_a_member_that_stops_in_a_rebalance_still_commits_its_final_offsets(broker):
    """At the end of the input the members stop one after another: the first to leave starts a
    rebalance, and the next one's final offsets (what lag monitors read) reach the group only from
    a stable generation. The member stopping in that rebalance keeps polling until it is stable
    again and commits them (before, it dropped them and the group kept older offsets)."""
    topic, first, second = _two_members(broker, "final-offsets")
    try:
        first.start()
        second.start()
        wait_for(
            lambda: _placed(first) and _placed(second) and first.generation == second.generation,
            60,
            what="both members in one generation",
        )
        stays, leaves = (second, first) if first._state.leads() else (first, second)
        leaves.close()  # a follower leaves: the group rebalances
        wait_for(lambda: stays.generation is None, 30, what="the member left to see the rebalance")
        final = {TopicPartition(topic, p): 100 + p for p in range(4)}
        stays.commit_offsets(final)
        stays.close()
    finally:
        first.close()
        second.close()
    assert _group_offsets(broker, stays.group_id) == {p: 100 + p for p in range(4)}

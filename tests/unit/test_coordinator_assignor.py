"""The assignor in the group protocol, driven as kafka-python's coordinator drives it (no broker):
subscriptions in, assignments out, cooperative moves over two rounds."""

from __future__ import annotations

from types import SimpleNamespace

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from samzapy.coordinator.assignor import LocalState, TaskAssignor, member_state

INPUTS = ["clicks", "views"]


class Cluster:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


class Member:
    """One member's assignor, with what it holds."""

    def __init__(self, member_id: str, state: LocalState | None = None, copies: int = 0) -> None:
        self.member_id = member_id
        self.state = state or LocalState()
        self.assignor = TaskAssignor(INPUTS, copies, lambda: self.state)

    def join(self) -> SimpleNamespace:
        wire = self.assignor.metadata(set(INPUTS)).encode()
        return SimpleNamespace(member_id=self.member_id, metadata=ConsumerProtocolSubscription.decode(wire))


def rebalance(members: list[Member], cluster: Cluster, generation: int) -> dict[str, set[tuple[str, int]]]:
    """One round: every member joins, the first is the leader, every member takes its share."""
    result = members[0].assignor.assign(cluster, [m.join() for m in members])
    partitions = {}
    for m in members:
        wire = ConsumerProtocolAssignment.decode(result[m.member_id].encode())
        m.assignor.on_assignment(wire, generation)
        partitions[m.member_id] = {(tp.topic, tp.partition) for tp in wire.partitions()}
    return partitions


def test_every_task_gets_partition_n_of_every_input():
    a, b = Member("a"), Member("b")
    partitions = rebalance([a, b], Cluster({"clicks": 4, "views": 4}), 1)
    assert partitions["a"] == {(t, p) for t in INPUTS for p in (0, 2)}
    assert partitions["b"] == {(t, p) for t in INPUTS for p in (1, 3)}
    assert a.assignor.assignment.actives == (0, 2) and a.assignor.assignment.generation == 1


def test_an_input_with_fewer_partitions_gives_only_what_it_has():
    a = Member("a")
    partitions = rebalance([a], Cluster({"clicks": 2, "views": 4}), 1)
    assert partitions["a"] == {("clicks", 0), ("clicks", 1)} | {("views", p) for p in range(4)}


def test_a_move_between_live_members_takes_two_rounds_and_nothing_else_stops():
    cluster = Cluster({"clicks": 4, "views": 4})
    a, b = Member("a"), Member("b")
    rebalance([a], cluster, 1)
    assert a.assignor.assignment.actives == (0, 1, 2, 3)
    first = rebalance([a, b], cluster, 2)  # b joins: a must let two tasks go first
    assert b.assignor.assignment.actives == () and b.assignor.assignment.withheld == (2, 3)
    assert a.assignor.assignment.actives == (0, 1)  # 0 and 1 never stopped
    assert first["b"] == set()
    second = rebalance([a, b], cluster, 3)
    assert b.assignor.assignment.actives == (2, 3) and a.assignor.assignment.actives == (0, 1)
    assert second["b"] == {(t, p) for t in INPUTS for p in (2, 3)}


def test_a_dead_members_tasks_move_in_one_round_to_the_freshest_copy():
    cluster = Cluster({"clicks": 4, "views": 4})
    a, b, c = Member("a"), Member("b"), Member("c")
    rebalance([a, b, c], cluster, 1)
    assert (a.assignor.assignment.actives, b.assignor.assignment.actives) == ((0, 3), (1,))
    b.state = LocalState(held={0: 10, 3: 900})
    c.state = LocalState(held={0: 500, 3: 7})
    rebalance([b, c], cluster, 2)  # a died: 0 goes where its state is freshest, so does 3
    assert b.assignor.assignment.actives == (1, 3)
    assert c.assignor.assignment.actives == (0, 2)


def test_standbys_and_endpoints_reach_every_member():
    cluster = Cluster({"clicks": 2, "views": 2})
    a = Member("a", LocalState(endpoint="h1:7000"), copies=1)
    b = Member("b", LocalState(endpoint="h2:7000"), copies=1)
    rebalance([a, b], cluster, 1)
    assert a.assignor.assignment.standbys == b.assignor.assignment.actives == (1,)
    assert b.assignor.assignment.standbys == a.assignor.assignment.actives == (0,)
    assert a.assignor.assignment.endpoints == {0: "h1:7000", 1: "h2:7000"}


def test_a_subscription_without_samzapy_user_data_holds_nothing():
    sub = ConsumerProtocolSubscription(version=1, topics=INPUTS, user_data=b"", owned_partitions=[])
    state = member_state("x", sub)
    assert state.held == {} and state.previous_actives == frozenset()

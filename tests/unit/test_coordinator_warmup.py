"""Moves that wait for a warm copy (KIP-441, placement rule 5): the pure rule, then the assignor
over rounds of the group protocol (no broker), as kafka-python's coordinator drives it; and the
revocation listener's handover grace (a revoked task runs on before it goes)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_coordinator_assignor import INPUTS, Cluster, rebalance  # noqa: E402

from samzapy.coordinator.assignor import LocalState, TaskAssignor, WarmupRules  # noqa: E402
from samzapy.coordinator.placement_rules import MemberState, hold_for_warmups, place_tasks  # noqa: E402

OWNER = MemberState("a", held={t: 100_000 for t in range(4)}, previous_actives=frozenset(range(4)))


def test_a_move_to_a_cold_member_waits_with_a_warm_up_copy_at_most_max_warmups() -> None:
    cold = MemberState("b")
    placed = place_tasks(range(4), [OWNER, cold])
    assert placed.members["b"].actives == (2, 3)  # balance alone would move two tasks at once
    held = hold_for_warmups(placed, [OWNER, cold], acceptable_lag=1_000, max_warmups=1)
    assert held.members["a"].actives == (0, 1, 2, 3) and held.members["b"].actives == ()
    assert held.members["b"].warmups == (2,)  # one warm-up copy; task 3 waits for a later round


def test_a_copy_within_the_acceptable_lag_moves_at_once() -> None:
    warm = MemberState("b", held={2: 99_500, 3: 50})
    held = hold_for_warmups(place_tasks(range(4), [OWNER, warm]), [OWNER, warm], 1_000, 2)
    assert held.members["b"].actives == (2,) and held.members["b"].warmups == (3,)
    assert held.members["a"].actives == (0, 1, 3)


def test_a_dead_owners_tasks_and_max_warmups_zero_move_at_once() -> None:
    alone = MemberState("b")
    placed = place_tasks(range(4), [alone])  # a left the group: nobody to wait on
    assert hold_for_warmups(placed, [alone], 0, 2).members["b"].actives == (0, 1, 2, 3)
    placed = place_tasks(range(4), [OWNER, alone])
    assert hold_for_warmups(placed, [OWNER, alone], 0, 0) == placed


class Member:
    def __init__(self, member_id: str, rules: WarmupRules) -> None:
        self.member_id = member_id
        self.state = LocalState()
        self.assignor = TaskAssignor(INPUTS, 0, lambda: self.state, rules)

    def join(self):
        from types import SimpleNamespace

        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

        wire = self.assignor.metadata(set(INPUTS)).encode()
        return SimpleNamespace(member_id=self.member_id, metadata=ConsumerProtocolSubscription.decode(wire))


def test_a_joining_member_warms_up_then_takes_its_tasks_at_a_probing_rebalance() -> None:
    cluster = Cluster({"clicks": 4, "views": 4})
    rules = WarmupRules(acceptable_lag=1_000, max_warmups=2)
    a, b = Member("a", rules), Member("b", rules)
    rebalance([a], cluster, 1)
    a.state = LocalState(held={t: 80_000 for t in range(4)})
    rebalance([a, b], cluster, 2)  # b joins cold
    assert a.assignor.assignment.actives == (0, 1, 2, 3)  # nothing stopped, nothing moved
    assert b.assignor.assignment.actives == () and b.assignor.assignment.warmups == (2, 3)
    b.state = LocalState(held={2: 79_500, 3: 60_000})  # its copy of 2 caught up, of 3 not yet
    rebalance([a, b], cluster, 3)  # the probing rebalance: 2 moves (revoked from a first)
    assert a.assignor.assignment.actives == (0, 1, 3) and b.assignor.assignment.withheld == (2,)
    assert b.assignor.assignment.warmups == (3,)
    rebalance([a, b], cluster, 4)
    assert b.assignor.assignment.actives == (2,) and b.assignor.assignment.warmups == (3,)


class _Ready:
    """An awaitable that is done at once (what the I/O loop's sleep is after the pause)."""

    def __await__(self):
        return iter(())


class _Revoking:
    """The member side the revocation listener talks to; the container acknowledges at its
    first look."""

    closing = False
    handover_grace_s = 1.25
    revoke_wait_s = 3.0

    def __init__(self) -> None:
        self.notes = None
        self.seen: list[tuple[float, set[int]]] = []  # each pause, and what the container had then

    def sleep(self, seconds: float) -> _Ready:
        self.seen.append((seconds, set(self.notes.pending.revoked)))
        if len(self.seen) > 1:
            self.notes.acknowledged.set()  # the container let them go
        return _Ready()


def test_a_revoked_task_runs_on_for_the_handover_grace_then_goes_to_the_container() -> None:
    from kafka import TopicPartition

    from samzapy.coordinator.group import _Notes

    member = _Revoking()
    member.notes = notes = _Notes(member)
    listener = notes.on_partitions_revoked([TopicPartition("clicks", 2), TopicPartition("views", 2)])
    try:
        listener.send(None)
    except StopIteration:
        pass
    else:
        raise AssertionError("the listener did not finish once the container let go")
    assert member.seen[0] == (1.25, set())  # the grace first: the task still runs here
    assert member.seen[1][1] == {2}  # then handed to the container, which commits and lets it go
    assert notes.take(None).revoked == {2}


def test_a_member_probes_as_soon_as_every_warm_up_copy_is_within_the_acceptable_lag() -> None:
    from samzapy.coordinator.warmup_probe import CAUGHT_UP, ProbeSchedule

    probes = ProbeSchedule(every_s=60.0, acceptable_lag=1_000, floor_s=5.0)
    assert probes.due((2, 3), {2: 40_000, 3: 40_000}, now=0.0) is None  # both cold
    assert probes.due((2, 3), {2: 900, 3: 1_001}, now=1.0) is None  # 3 is one record too far
    assert probes.due((2, 3), {2: 900}, now=1.5) is None  # 3's lag not known yet
    assert probes.due((2, 3), {2: 900, 3: None}, now=1.6) is None  # nor now
    assert probes.due((2, 3), {2: 900, 3: 1_000}, now=2.0) == CAUGHT_UP  # long before 60 s
    assert probes.due((), {}, now=2.1) is None  # no warm-up copies: never a probe
    assert probes.due((), {2: 0}, now=100.0) is None


def test_caught_up_probes_are_at_most_one_per_floor_however_often_the_member_polls() -> None:
    from samzapy.coordinator.warmup_probe import CAUGHT_UP, ProbeSchedule

    probes = ProbeSchedule(every_s=60.0, acceptable_lag=1_000, floor_s=5.0)
    warm = {2: 0, 3: 10}
    polls = [i * 0.2 for i in range(100)]  # 20 s of membership polls, copies warm all along
    fired = [t for t in polls if probes.due((2, 3), warm, now=t) is not None]
    assert fired == [0.0, 5.0, 10.0, 15.0]
    assert probes.due((2, 3), warm, now=20.0) == CAUGHT_UP


def test_copies_that_do_not_catch_up_are_probed_every_probing_interval() -> None:
    from samzapy.coordinator.warmup_probe import PERIODIC, ProbeSchedule

    probes = ProbeSchedule(every_s=60.0, acceptable_lag=1_000, floor_s=5.0)
    cold = {2: 50_000}
    fired = [(t, r) for t in range(0, 181, 1) if (r := probes.due((2,), cold, now=float(t))) is not None]
    assert fired == [(60, PERIODIC), (120, PERIODIC), (180, PERIODIC)]
    # a caught-up probe restarts the periodic clock; new copies after none restart it too
    assert probes.due((), {}, now=181.0) is None
    assert probes.due((3,), {3: 50_000}, now=200.0) is None
    assert probes.due((3,), {3: 50_000}, now=259.0) is None
    assert probes.due((3,), {3: 50_000}, now=260.0) == PERIODIC

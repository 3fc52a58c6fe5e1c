"""The group leader's task placement: stickiness, freshest state, balance, standbys, racks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samzapy.coordinator.placement_rules import MemberState, place_tasks


def member(member_id: str, actives=(), standbys=(), held=None, rack=None, endpoint=None) -> MemberState:
    return MemberState(
        member_id,
        held=dict(held or {}),
        previous_actives=frozenset(actives),
        previous_standbys=frozenset(standbys),
        rack=rack,
        endpoint=endpoint,
    )


def test_tasks_stay_with_their_previous_owner_when_a_member_joins():
    before = place_tasks(range(8), [member("a"), member("b")])
    a, b = before.members["a"].actives, before.members["b"].actives
    after = place_tasks(range(8), [member("a", a), member("b", b), member("c")])
    moved = {t for t in range(8) if after.owner_of(t) != before.owner_of(t)}
    assert len(moved) == 2  # only what the newcomer needs for balance (3, 3, 2)
    assert all(after.owner_of(t) == "c" for t in moved)
    assert sorted(len(after.members[m].actives) for m in "abc") == [2, 3, 3]


def test_a_dead_members_tasks_go_to_the_member_with_the_freshest_copy():
    # a died; b holds an old copy of task 0, c a fresh one (a standby); the reverse for task 1
    b = member("b", actives=[2], held={0: 100, 1: 900})
    c = member("c", actives=[3], held={0: 800, 1: 50})
    placement = place_tasks(range(4), [b, c])
    assert placement.owner_of(0) == "c"
    assert placement.owner_of(1) == "b"
    assert placement.owner_of(2) == "b" and placement.owner_of(3) == "c"


def test_a_member_with_no_state_still_gets_its_share():
    placement = place_tasks(range(6), [member("a", held={t: 10 for t in range(6)}), member("new")])
    assert len(placement.members["new"].actives) == 3
    assert len(placement.members["a"].actives) == 3


def test_balance_moves_the_owners_newest_tasks_first():
    # a ran 0..3 before; b is new: two of a's tasks must move, b holds task 2's state
    placement = place_tasks(range(4), [member("a", actives=range(4)), member("b", held={2: 5})])
    assert placement.owner_of(2) == "b"
    assert len(placement.members["b"].actives) == 2


def test_two_claimants_of_one_task_the_fresher_keeps_it():
    a = member("a", actives=[0], held={0: 10})
    b = member("b", actives=[0, 1], held={0: 20})
    placement = place_tasks(range(2), [a, b])
    assert placement.owner_of(0) == "b" and placement.owner_of(1) == "a"


def test_standbys_never_with_their_active_and_at_most_one_per_member():
    placement = place_tasks(range(6), [member(m) for m in "abc"], standby_copies=2)
    for task in range(6):
        holders = [m for m, a in placement.members.items() if task in a.standbys]
        assert len(holders) == 2 == len(set(holders))
        assert placement.owner_of(task) not in holders


def test_standby_copies_are_capped_by_the_other_members():
    placement = place_tasks(range(2), [member("a"), member("b")], standby_copies=3)
    assert sorted(placement.members["a"].standbys + placement.members["b"].standbys) == [0, 1]


def test_standbys_go_to_another_rack():
    members = [member("a", rack="r1"), member("b", rack="r1"), member("c", rack="r2"), member("d", rack="r2")]
    placement = place_tasks(range(8), members, standby_copies=1)
    rack = {m.member_id: m.rack for m in members}
    for task in range(8):
        standby = next(m for m, a in placement.members.items() if task in a.standbys)
        assert rack[standby] != rack[placement.owner_of(task)]


def test_standbys_stay_where_they_are_warm():
    first = place_tasks(range(4), [member(m) for m in "abc"], standby_copies=1)
    again = place_tasks(
        range(4),
        [member(m, first.members[m].actives, first.members[m].standbys) for m in "abc"],
        standby_copies=1,
    )
    assert again == first


def test_endpoints_map_each_task_to_its_owner():
    placement = place_tasks(range(2), [member("a", [0], endpoint="h1:1"), member("b", [1], endpoint="h2:2")])
    assert placement.endpoints == {0: "h1:1", 1: "h2:2"}


def test_the_same_input_gives_the_same_placement_in_any_member_order():
    members = [member("b", [1], held={0: 4}), member("a", [0, 2]), member("c", held={2: 9})]
    assert place_tasks(range(5), members, 1) == place_tasks(range(5), list(reversed(members)), 1)


@settings(max_examples=200, deadline=None)
@given(
    task_count=st.integers(1, 24),
    member_count=st.integers(1, 6),
    copies=st.integers(0, 3),
    data=st.data(),
)
def test_every_task_runs_once_and_loads_differ_by_at_most_one(task_count, member_count, copies, data):
    ids = [f"m{i}" for i in range(member_count)]
    previous = {m: data.draw(st.sets(st.integers(0, task_count - 1))) for m in ids}
    held = {m: data.draw(st.dictionaries(st.integers(0, task_count - 1), st.integers(0, 100))) for m in ids}
    placement = place_tasks(range(task_count), [member(m, previous[m], held=held[m]) for m in ids], copies)
    owners = [m for t in range(task_count) for m, a in placement.members.items() if t in a.actives]
    assert len(owners) == task_count
    loads = [len(a.actives) for a in placement.members.values()]
    assert max(loads) - min(loads) <= 1
    for task in range(task_count):
        holders = [m for m, a in placement.members.items() if task in a.standbys]
        assert len(holders) == len(set(holders)) == min(copies, member_count - 1)
        assert placement.owner_of(task) not in holders


def test_docstring_examples():
    import doctest

    import samzapy.coordinator.placement_rules as module

    assert doctest.testmod(module).failed == 0

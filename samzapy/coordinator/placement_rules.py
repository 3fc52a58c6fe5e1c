"""Where each task runs in group mode: the placement the group leader computes.

A pure function of what the members told the leader (:class:`MemberState`): no broker, no
clock, no randomness, so every leader computes the same placement from the same input and the
rules can be tested on their own. The rules, in order of precedence:

1. **Sticky**: a task stays with the member that ran it in the previous generation (when two
   members claim it, e.g. after a partition healed, the one holding the fresher state keeps it).
2. **Freshest state**: a task without a live previous owner goes to the member whose local
   copy of its stores (a local checkpoint or a standby) is the freshest, so the move replays
   the least changelog (Kafka Streams' task offset sums).
3. **Balance**: no member runs more than one task more than another; when a move is needed to
   get there, a task new to its current member moves first, then the one whose state the
   receiver holds freshest.
4. **Standbys**: each task gets ``copies`` standbys on members other than its active (never
   two copies on one member), preferring a rack the task's other copies are not on, then a
   member that already holds the task's state, then the least loaded.
5. **Warm-up before a move** (Kafka Streams' KIP-441, :func:`hold_for_warmups`, when
   ``job.coordinator.max.warmup.replicas`` > 0): a task the rules above move away from a live
   member stays there while the new member's copy is more than the acceptable lag behind; the
   new member keeps a warm-up copy meanwhile (at most ``max_warmups`` in the group), and a
   later (probing) rebalance moves the task once the copy has caught up. A task whose owner
   left moves at once: there is nobody to wait on.

The unit everywhere is the task (partition N of every input, with its stores), never a lone
input partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: The "freshness" of a member that holds no copy of a task's state.
NO_STATE = -1


@dataclass(frozen=True)
class MemberState:
    """What one member of the group tells the leader when it joins.

    Attributes:
        member_id: the group member id the broker gave it.
        held: per task (partition number), the freshness of the member's newest local copy of
            the task's stores: the sum of their changelog offsets (higher is fresher).
        previous_actives: the tasks it ran in the previous generation.
        previous_standbys: the tasks it kept standby copies of in the previous generation.
        endpoint: where its interactive queries answer (``host:port``), if it serves them.
        rack: a rack or zone tag; standbys avoid the racks of their task's other copies.
    """

    member_id: str
    held: Mapping[int, int] = field(default_factory=dict)
    previous_actives: frozenset[int] = frozenset()
    previous_standbys: frozenset[int] = frozenset()
    endpoint: str | None = None
    rack: str | None = None

    def freshness(self, task: int) -> int:
        """How fresh this member's copy of ``task`` is (:data:`NO_STATE` when it has none)."""
        return self.held.get(task, NO_STATE)


@dataclass(frozen=True)
class MemberAssignment:
    """The tasks one member runs, keeps warm copies of, and warms up before they move to it.

    All three sorted: ``actives``, ``standbys``, ``warmups``.
    """

    actives: tuple[int, ...] = ()
    standbys: tuple[int, ...] = ()
    warmups: tuple[int, ...] = ()


@dataclass(frozen=True)
class Placement:
    """The whole group's assignment: every member's tasks, and each task's query endpoint."""

    members: dict[str, MemberAssignment]
    endpoints: dict[int, str]

    def owner_of(self, task: int) -> str:
        """The member id running ``task``.

        Raises:
            KeyError: the task is not placed.
        """
        for member_id, assignment in self.members.items():
            if task in assignment.actives:
                return member_id
        raise KeyError(task)


def place_tasks(tasks: Sequence[int], members: Sequence[MemberState], standby_copies: int = 0) -> Placement:
    """Place every task on one member and its standbys on others (the module's rules).

    Args:
        tasks: the job's tasks (partition numbers).
        members: every member of the generation; at least one.
        standby_copies: standbys per task (``job.standbytasks.replication.factor - 1``); fewer
            when the group has fewer other members.

    Raises:
        ValueError: no members, or a member id given twice.

    >>> a, b = MemberState("a", previous_actives=frozenset({0, 1, 2})), MemberState("b")
    >>> p = place_tasks([0, 1, 2, 3], [a, b])
    >>> p.members["a"].actives, p.members["b"].actives
    ((0, 1), (2, 3))
    """
    by_id = {m.member_id: m for m in members}
    if not by_id:
        msg = "cannot place tasks on a group with no members"
        raise ValueError(msg)
    if len(by_id) != len(members):
        msg = f"member ids must be unique, got {sorted(m.member_id for m in members)}"
        raise ValueError(msg)
    actives = _place_actives(sorted(set(tasks)), by_id)
    standbys = _place_standbys(actives, by_id, standby_copies)
    assignments = {
        member_id: MemberAssignment(
            tuple(sorted(t for t, owner in actives.items() if owner == member_id)),
            tuple(sorted(t for t, holders in standbys.items() if member_id in holders)),
        )
        for member_id in sorted(by_id)
    }
    endpoints = {t: endpoint for t, owner in actives.items() if (endpoint := by_id[owner].endpoint)}
    return Placement(assignments, endpoints)


def _place_actives(tasks: list[int], by_id: dict[str, MemberState]) -> dict[int, str]:
    """Task -> member id, by stickiness, then freshest state, then balance."""
    ceiling = -(-len(tasks) // len(by_id))  # no member needs more than this
    load = dict.fromkeys(by_id, 0)
    owner: dict[int, str] = {}
    for task in tasks:
        claimants = [m for m in by_id.values() if task in m.previous_actives and load[m.member_id] < ceiling]
        if claimants:
            chosen = max(claimants, key=lambda m: (m.freshness(task), _desc(m.member_id)))
            owner[task] = chosen.member_id
            load[chosen.member_id] += 1
    for task in tasks:
        if task in owner:
            continue
        candidates = [m for m in by_id.values() if load[m.member_id] < ceiling]
        chosen = max(candidates, key=lambda m: (m.freshness(task), -load[m.member_id], _desc(m.member_id)))
        owner[task] = chosen.member_id
        load[chosen.member_id] += 1
    _balance(owner, load, by_id)
    return owner


def _balance(owner: dict[int, str], load: dict[str, int], by_id: dict[str, MemberState]) -> None:
    """Move tasks from the most to the least loaded member until loads differ by at most one."""
    while True:
        giver = max(load, key=lambda m: (load[m], _desc(m)))
        taker = min(load, key=lambda m: (load[m], m))
        if load[giver] - load[taker] <= 1:
            return
        receiver = by_id[taker]
        movable = [t for t, m in owner.items() if m == giver]
        task = max(
            movable,
            key=lambda t: (t not in by_id[giver].previous_actives, receiver.freshness(t), -t),
        )
        owner[task] = taker
        load[giver] -= 1
        load[taker] += 1


def _place_standbys(
    actives: dict[int, str], by_id: dict[str, MemberState], copies: int
) -> dict[int, list[str]]:
    """Task -> the member ids keeping standby copies of it."""
    copies = min(max(copies, 0), len(by_id) - 1)
    standbys: dict[int, list[str]] = {task: [] for task in actives}
    load = dict.fromkeys(by_id, 0)
    for _ in range(copies):
        for task in sorted(actives):
            holders = [actives[task], *standbys[task]]
            racks = {by_id[h].rack for h in holders if by_id[h].rack is not None}
            candidates = [m for m in by_id.values() if m.member_id not in holders]
            chosen = min(
                candidates,
                key=lambda m: (
                    m.rack is not None and m.rack in racks,
                    load[m.member_id] - (1 if _warm(m, task) else 0),
                    -m.freshness(task),
                    m.member_id,
                ),
            )
            standbys[task].append(chosen.member_id)
            load[chosen.member_id] += 1
    return standbys


def _warm(member: MemberState, task: int) -> bool:
    return task in member.previous_standbys or member.freshness(task) != NO_STATE


def _desc(member_id: str) -> tuple[int, ...]:
    """A key that sorts member ids in descending order inside a ``max``.

    Ties go to the smallest id, so every leader breaks them the same way.
    """
    return (*(-ord(c) for c in member_id), 1)


def hold_for_warmups(
    placement: Placement, members: Sequence[MemberState], acceptable_lag: int, max_warmups: int
) -> Placement:
    """Rule 5 of the module docstring applied to ``placement``.

    Moves whose receiver is more than ``acceptable_lag`` changelog records behind the current
    owner wait, with a warm-up copy on the receiver (at most ``max_warmups``; the others wait
    without one, for a later round). ``max_warmups`` <= 0 returns ``placement`` as it is.

    >>> a = MemberState("a", held={0: 50_000, 1: 50_000}, previous_actives=frozenset({0, 1}))
    >>> b = MemberState("b", held={1: 49_990})
    >>> held = hold_for_warmups(place_tasks([0, 1], [a, b]), [a, b], 1_000, 2)
    >>> held.members["a"].actives, held.members["b"].actives, held.members["b"].warmups
    ((0,), (1,), ())
    >>> b = MemberState("b")
    >>> held = hold_for_warmups(place_tasks([0, 1], [a, b]), [a, b], 1_000, 2)
    >>> held.members["a"].actives, held.members["b"].actives, held.members["b"].warmups
    ((0, 1), (), (1,))
    """
    if max_warmups <= 0:
        return placement
    by_id = {m.member_id: m for m in members}
    owner = {t: m for m, share in placement.members.items() for t in share.actives}
    standbys = {m: set(share.standbys) for m, share in placement.members.items()}
    warmups: dict[str, set[int]] = {m: set() for m in placement.members}
    used = 0
    for task in sorted(owner):
        receiver = by_id[owner[task]]
        previous = [m for m in by_id.values() if task in m.previous_actives and m is not receiver]
        if not previous:
            continue  # a new task, or its owner left: it moves at once
        current = max(previous, key=lambda m: (m.freshness(task), _desc(m.member_id)))
        if current.freshness(task) - receiver.freshness(task) <= acceptable_lag:
            continue
        owner[task] = current.member_id
        standbys[current.member_id].discard(task)
        if used < max_warmups:
            warmups[receiver.member_id].add(task)
            standbys[receiver.member_id].discard(task)
            used += 1
    members_out = {
        m: MemberAssignment(
            tuple(sorted(t for t, o in owner.items() if o == m)),
            tuple(sorted(standbys[m])),
            tuple(sorted(warmups[m])),
        )
        for m in placement.members
    }
    endpoints = {t: e for t, o in owner.items() if (e := by_id[o].endpoint)}
    return Placement(members_out, endpoints)

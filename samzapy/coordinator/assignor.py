"""samzapy's assignor inside Kafka's consumer-group protocol.

It plays the part of Kafka Streams' ``StreamsPartitionAssignor`` and Faust's ``PartitionAssignor``.

Each member sends in its subscription what it holds (:class:`LocalState`: the freshness of its
local copy of every task's stores, its query endpoint, its rack) and, as KIP-429 asks, the
partitions it owns. The elected leader turns that into :class:`MemberState` records, computes
the placement (:func:`samzapy.coordinator.placement_rules.place_tasks`) and hands every member the
input partitions of its active tasks, with its standbys and the task -> endpoint map in the
assignment's user data.

Moves are cooperative (KIP-429): a task that goes from one live member to another is first
given to nobody; its owner sees it revoked, commits and lets go, and kafka-python's coordinator
asks for a second round in which the task lands on its new member. Every other task keeps
running through both rounds.

The unit is the task: partition ``N`` of every input goes to the member that runs task ``N``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from samzapy.coordinator.placement_rules import MemberState, hold_for_warmups, place_tasks

log = logging.getLogger(__name__)

#: Version of the user data samzapy puts in subscriptions and assignments.
USER_DATA_VERSION = 1


@dataclass(frozen=True)
class LocalState:
    """What this member holds and where it answers, as its subscription reports it.

    Attributes:
        held: per task, the freshness of the newest local copy of its stores (the sum of their
            changelog offsets; a local checkpoint or a standby copy).
        standbys: the tasks this member keeps standby copies of now.
        endpoint: the URL it answers interactive queries at, if any.
        rack: its rack or zone tag, if any.
    """

    held: dict[int, int] = field(default_factory=dict)
    standbys: frozenset[int] = frozenset()
    endpoint: str | None = None
    rack: str | None = None


@dataclass(frozen=True)
class TaskAssignment:
    """This member's share of one generation, as the leader sent it.

    Attributes:
        generation: the group generation it belongs to.
        actives: the tasks this member runs.
        standbys: the tasks it keeps warm copies of.
        endpoints: every running task's query endpoint (for routing interactive queries).
        withheld: tasks placed on this member but held back for this round because another
            member still owns them (they arrive in the follow-up round).
        warmups: tasks this member warms up a copy of before they move to it (KIP-441).
    """

    generation: int
    actives: tuple[int, ...] = ()
    standbys: tuple[int, ...] = ()
    endpoints: dict[int, str] = field(default_factory=dict)
    withheld: tuple[int, ...] = ()
    warmups: tuple[int, ...] = ()


@dataclass(frozen=True)
class WarmupRules:
    """When a move waits for a warm copy (``job.coordinator.*``; placement rule 5).

    Attributes:
        acceptable_lag: the changelog records a receiver's copy may be behind.
        max_warmups: warm-up copies at once in the group (0: moves never wait).
    """

    acceptable_lag: int = 10_000
    max_warmups: int = 0


class TaskAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # kafka-python ships no types
    """The assignor every samzapy member registers with its group consumer.

    Args:
        inputs: the job's input topics (task ``N`` takes partition ``N`` of each).
        standby_copies: standbys per task (``job.standbytasks.replication.factor - 1``).
        local_state: called for each subscription, returns what this member holds now.
        warmup: when moves wait for a warm copy (default: never).
    """

    name = "samzapy-tasks"
    version = 1

    def __init__(
        self,
        inputs: Sequence[str],
        standby_copies: int,
        local_state: Callable[[], LocalState],
        warmup: WarmupRules | None = None,
    ):
        self._inputs = sorted(set(inputs))
        self._warmup = warmup or WarmupRules()
        self._standby_copies = standby_copies
        self._local_state = local_state
        self._actives: tuple[int, ...] = ()
        self.assignment: TaskAssignment | None = None

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """Cooperative only: only the tasks that move stop."""
        return [RebalanceProtocol.COOPERATIVE]

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolSubscription:
        """This member's subscription: its owned partitions and its :class:`LocalState`."""
        state = self._local_state()
        body = {
            "v": USER_DATA_VERSION,
            "held": {str(t): o for t, o in sorted(state.held.items())},
            "standbys": sorted(state.standbys),
            "endpoint": state.endpoint,
            "rack": state.rack,
        }
        return ConsumerProtocolSubscription(
            version=self.version,
            topics=sorted(topics),
            user_data=json.dumps(body).encode(),
            owned_partitions=_wire_partitions(ConsumerProtocolSubscription, self._inputs, self._actives),
        )

    def assign(self, cluster: Any, members: Sequence[Any]) -> dict[str, ConsumerProtocolAssignment]:
        """The leader's work: place the tasks, then hold back those still owned elsewhere."""
        states = [member_state(m.member_id, m.metadata) for m in members]
        counts = {t: len(cluster.partitions_for_topic(t) or ()) for t in self._inputs}
        tasks = range(max(counts.values(), default=0))
        placement = place_tasks(tasks, states, self._standby_copies)
        rules = self._warmup
        placement = hold_for_warmups(placement, states, rules.acceptable_lag, rules.max_warmups)
        owners: dict[int, set[str]] = {}
        for state in states:
            for task in state.previous_actives:
                owners.setdefault(task, set()).add(state.member_id)
        result = {}
        for member_id, share in placement.members.items():
            now = [t for t in share.actives if owners.get(t, set()) <= {member_id}]
            withheld = [t for t in share.actives if t not in now]
            body = {
                "v": USER_DATA_VERSION,
                "actives": now,
                "standbys": list(share.standbys),
                "endpoints": {str(t): e for t, e in sorted(placement.endpoints.items())},
                "withheld": withheld,
                "warmups": list(share.warmups),
            }
            partitions = [(topic, [p for p in now if p < counts[topic]]) for topic in self._inputs]
            result[member_id] = ConsumerProtocolAssignment(
                version=self.version,
                assigned_partitions=[
                    ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
                    for t, ps in partitions
                    if ps
                ],
                user_data=json.dumps(body).encode(),
            )
        log.info("placed %d tasks on %d members: %s", len(tasks), len(states), _summary(result))
        return result

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation: int) -> None:
        """Keep this member's share (read by the container after each rebalance)."""
        self.assignment = decode_assignment(assignment.user_data, generation)
        self._actives = self.assignment.actives


def member_state(member_id: str, subscription: ConsumerProtocolSubscription) -> MemberState:
    """The :class:`MemberState` a subscription describes.

    A member of another version, or one that sent no samzapy user data, is taken as holding
    nothing.
    """
    owned = {p for tp in (getattr(subscription, "owned_partitions", None) or ()) for p in tp.partitions}
    try:
        body = json.loads(subscription.user_data or b"{}")
    except ValueError:
        body = {}
    if body.get("v") != USER_DATA_VERSION:
        body = {}
    return MemberState(
        member_id,
        held={int(t): int(o) for t, o in body.get("held", {}).items()},
        previous_actives=frozenset(owned),
        previous_standbys=frozenset(int(t) for t in body.get("standbys", [])),
        endpoint=body.get("endpoint"),
        rack=body.get("rack"),
    )


def decode_assignment(user_data: bytes, generation: int) -> TaskAssignment:
    """This member's :class:`TaskAssignment` from the assignment's user data."""
    body = json.loads(user_data or b"{}")
    return TaskAssignment(
        generation=generation,
        actives=tuple(body.get("actives", ())),
        standbys=tuple(body.get("standbys", ())),
        endpoints={int(t): e for t, e in body.get("endpoints", {}).items()},
        withheld=tuple(body.get("withheld", ())),
        warmups=tuple(body.get("warmups", ())),
    )


def _wire_partitions(schema: Any, topics: list[str], tasks: Iterable[int]) -> list[Any]:
    parts = sorted(tasks)
    return [schema.TopicPartition(topic=t, partitions=parts) for t in topics] if parts else []


def _summary(result: dict[str, ConsumerProtocolAssignment]) -> str:
    parts = []
    for member, assignment in sorted(result.items()):
        body = json.loads(assignment.user_data)
        warm = f" (warming up {body['warmups']})" if body.get("warmups") else ""
        parts.append(f"{member}: {body['actives']}{warm}")
    return "; ".join(parts)

"""What kafka-python's group coordinator knows and its public API does not tell.

Group mode needs four facts about its membership that ``KafkaConsumer`` keeps private: the
generation once the group is stable, whether a rejoin is pending, whether this member is the
group leader, and when the broker last answered a heartbeat (the member's lease,
:meth:`GroupMembership.lease_valid <samzapy.coordinator.group.GroupMembership.lease_valid>`);
and it uses three handles: a pause on the client's I/O loop for its async rebalance listener,
the listener-time warning threshold, and a close that does not leave the group. It also mends
one fault of the client's join (:func:`keep_finished_joins`). They are read from the internals
of the kafka-python versions pyproject.toml pins (checked against :data:`CHECKED_VERSIONS`);
:func:`coordinator_state` refuses, with the fix, a client that does not have them, so group
mode never runs on guesses, and the member logs at start that it reads them. It lives in
:mod:`samzapy.kafka` because the client's private internals are read there alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kafka

try:
    from kafka.structs import MemberState
except ImportError:  # another kafka-python: coordinator_state() says so when group mode starts
    MemberState = None

from samzapy.errors import SamzapyError

log = logging.getLogger(__name__)

#: The kafka-python releases these internals were read from.
CHECKED_VERSIONS = "3.0.x"


class ClientInternalsMissing(SamzapyError):
    """The installed kafka-python lacks the group-coordinator state group mode reads."""


def keep_finished_joins(consumer: Any) -> None:
    """Make ``consumer`` complete a join that finished while no poll was waiting for it.

    kafka-python 3.0.x runs a JoinGroup + SyncGroup as a task on its I/O loop and awaits it
    from ``poll()`` for at most the poll's timeout; a task still running then is awaited again
    by the next poll. But a task that finished *between* two polls is thrown away: the next
    poll sees it done and sends a new JoinGroup instead of taking the assignment it carries
    (``join_group_async``: ``if self._join_task is None or self._join_task.is_done``). The
    member then rejoins a group that has just formed, with subscription metadata that has
    changed since (samzapy's carries the freshness of its local copies), which starts another
    generation; the round just completed is lost for every member (a follower waits in its
    SyncGroup for it and fails), and a task being moved stays unowned a round or two more.
    On the dev broker a join takes 3 s, far longer than one poll of the membership thread
    (0.2 s), so it is awaited over many polls and now and then finishes between two of them:
    that was the round lost in about one warm-up move in seven (issue 30; with the debug line
    below, a join completed here in 3 of 9 runs of the warm-up test). Such a finished join is
    completed as kafka-python completes one it awaits (the same steps, in the same order); one
    that failed is retried as before.
    """
    coordinator = consumer._coordinator
    original = coordinator.join_group_async

    async def join_group_async(timeout_ms: Any = None) -> Any:
        task = coordinator._join_task
        if task is None or not task.succeeded():
            return await original(timeout_ms=timeout_ms)
        coordinator._join_task = None
        with coordinator._lock:
            coordinator.rejoining = False
            coordinator.rejoin_needed = False
            coordinator.state = MemberState.STABLE
            coordinator._enable_heartbeat()
        generation = coordinator._generation
        log.debug("group %s: %s joined between two polls: completed", coordinator.group_id, generation)
        await coordinator._on_join_complete_async(
            generation.generation_id, generation.member_id, generation.protocol, task.value
        )
        return True

    coordinator.join_group_async = join_group_async


class CoordinatorState:
    """Read-only view of a consumer's group coordinator (kafka-python 3.0 internals)."""

    def __init__(self, consumer: Any) -> None:
        self._coordinator = consumer._coordinator
        self._heartbeat = self._coordinator.heartbeat

    def stable_generation(self) -> int | None:
        """The group generation while this member is in a stable group, else ``None``.

        Read without the coordinator's lock (``generation_if_stable`` takes it): a rebalance
        listener runs under that lock and waits for the container's thread, which reads this.
        """
        coordinator = self._coordinator
        generation = coordinator._generation
        if coordinator.state != MemberState.STABLE:
            return None
        return int(generation.generation_id)

    def member_id(self) -> str | None:
        """The member id the broker gave this member, ``None`` before it has one."""
        member = self._coordinator._generation.member_id
        return member or None

    def rejoin_needed(self) -> bool:
        """Whether the member has to (re)join before it is stable again."""
        return bool(self._coordinator.need_rejoin())

    def request_rejoin(self) -> None:
        """Ask for a rebalance at the member's next poll; call it from the polling thread.

        A probing rebalance: KIP-441's check whether warm-up copies have caught up.
        """
        self._coordinator.request_rejoin()

    def sleep(self, seconds: float) -> Any:
        """An awaitable pause on the client's I/O loop, for an async rebalance listener.

        The loop's heartbeats go on meanwhile (a blocking wait in a listener stops them).
        """
        return self._coordinator._net.sleep(seconds)

    def allow_listener_time(self, seconds: float) -> None:
        """Warn about a rebalance listener only past ``seconds`` (kafka-python warns past 1 s).

        samzapy's revocation listener waits on purpose: for the container's commit, and for the
        handover grace (:data:`samzapy.coordinator.group.HANDOVER_GRACE_S`).
        """
        self._coordinator._REBALANCE_LISTENER_WARN_SECS = seconds

    def leads(self) -> bool:
        """Whether this member computed the assignment of the round it is in (the group leader)."""
        return bool(self._coordinator._is_leader)

    def close_without_leaving(self, consumer: Any) -> None:
        """Close ``consumer`` without a LeaveGroup: the broker drops the member at its session timeout.

        What a static member does anyway. The group leader closes this way: the dev broker (Tansu
        0.6) keeps a leader that leaves while the group is forming as the leader of that round,
        so the round never completes (see :meth:`GroupMembership.close
        <samzapy.coordinator.group.GroupMembership.close>`).
        """
        coordinator = self._coordinator

        async def stay(reason: Any = None, timeout_ms: Any = None) -> None:
            coordinator.reset_generation()

        coordinator.maybe_leave_group_async = stay
        consumer.close(autocommit=False)

    def joined(self) -> bool:
        """Whether the member is in the group or joining it (not out of it)."""
        return bool(self._coordinator.state != MemberState.UNJOINED)

    def rebalancing(self) -> bool:
        """Whether a join or sync round is in flight (the broker holds the member meanwhile)."""
        return bool(self._coordinator.state == MemberState.REBALANCING)

    def seconds_since_answer(self) -> float:
        """Seconds since the broker last answered a heartbeat or completed a join for this member.

        Its session is counted from about then.
        """
        heartbeat = self._heartbeat
        return time.monotonic() - float(max(heartbeat.last_receive, heartbeat.last_reset))


def coordinator_state(consumer: Any) -> CoordinatorState:
    """The coordinator state of ``consumer``.

    Raises:
        ClientInternalsMissing: the installed kafka-python does not keep it where
            :data:`CHECKED_VERSIONS` do.
    """
    try:
        if MemberState is None:
            missing = "kafka.structs.MemberState"
            raise ImportError(missing)
        state = CoordinatorState(consumer)
        state.stable_generation()
        state.rejoin_needed()
        state.member_id()
        state.joined()
        state.seconds_since_answer()
        state.leads()
        coordinator = consumer._coordinator
        # what close_without_leaving() and keep_finished_joins() use
        handles = ["maybe_leave_group_async", "join_group_async", "_on_join_complete_async"]
        for name in [*handles, "_enable_heartbeat"]:
            if not callable(getattr(coordinator, name, None)):
                missing = f"the coordinator's {name}"
                raise AttributeError(missing)
        _ = (coordinator._join_task, coordinator._lock, coordinator.rejoining)
        _ = coordinator._generation.protocol
        if not callable(getattr(coordinator._net, "sleep", None)):
            missing = "the coordinator's I/O loop sleep"
            raise AttributeError(missing)
    except (AttributeError, ImportError) as exc:
        msg = (
            f"group mode reads kafka-python's group coordinator state, checked against kafka-python "
            f"{CHECKED_VERSIONS}; kafka-python {kafka.__version__} does not have it ({exc}). Install the "
            "kafka-python range pyproject.toml pins, or run with job.coordinator.factory=passthrough"
        )
        raise ClientInternalsMissing(msg) from exc
    return state


def describe() -> str:
    """One line for the start-up log: which client internals group mode reads."""
    return (
        f"group mode reads kafka-python {kafka.__version__} coordinator state "
        f"(generation, rejoin, heartbeat clock; checked against {CHECKED_VERSIONS})"
    )

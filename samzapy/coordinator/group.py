"""Group mode (``job.coordinator.factory=group``).

This process as a member of the job's Kafka consumer group, through kafka-python's group
coordinator and samzapy's :class:`~samzapy.coordinator.assignor.TaskAssignor`.

The member's consumer only takes part in the group protocol: it subscribes to the job's
inputs so that the broker's coordinator and the elected leader hand out their partitions, but
it never reads them (every partition it is given is paused at once). The container reads its
tasks' inputs with its own consumer, as in passthrough mode, from the offsets in its
checkpoints. So a rebalance changes which tasks the container runs and nothing else.

The membership consumer is polled by a thread of its own (joins take seconds; the run loop
must not wait for them). kafka-python calls the rebalance listener on its network thread; the
listener notes what changed, :meth:`GroupMembership.poll` hands it to the container as a
:class:`Rebalance`, and the container applies it on its own thread, between two turns of its
loop. Under the cooperative protocol (KIP-429) a task leaving this member is first revoked: it runs
on here for a short grace (:data:`HANDOVER_GRACE_S`, while the round's other members fetch
their assignments), then the listener waits (at most half the session timeout) until the
container has committed the task and let it go (:meth:`GroupMembership.acknowledge`), and the
task reaches its new owner in the follow-up round, right after that (the new owner, told in
its share that the tasks are withheld for it, joins that round at once). Tasks that stay keep
running through both rounds.

Ownership is still decided by samzapy's fence (:mod:`samzapy.container.fencing`): a member
that lost its membership without noticing cannot commit a task another member claimed. The
group's own generation is checked too: the input offsets committed to the group (for
``kafka-consumer-groups``, Burrow, KEDA) are refused by the broker from a stale generation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import AsyncConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError

from samzapy.config import JobConfig
from samzapy.coordinator.assignor import LocalState, TaskAssignment, TaskAssignor, WarmupRules
from samzapy.coordinator.warmup_probe import CAUGHT_UP, ProbeSchedule
from samzapy.kafka import group_state

log = logging.getLogger(__name__)

#: The rebalance timeout (kafka-python's ``max_poll_interval_ms``) is this many session
#: timeouts, at least :data:`MIN_REBALANCE_TIMEOUT_MS`. The membership thread rejoins within a
#: poll (:data:`POLL_MS`) or a revocation's wait (half a session), whatever the container does,
#: so a short bound costs nothing; it also bounds how long the member waits for a JoinGroup
#: answer (the timeout plus 5 s). With the 600 s this was before, a member was seen (on the dev
#: broker, on a loaded machine, about one run in twenty of a test) waiting in its join for over
#: 90 s, still running the tasks it had, while the rest of the group waited for it; a JoinGroup
#: is the one request of a join that may take that long unanswered.
REBALANCE_TIMEOUT_SESSIONS = 3
MIN_REBALANCE_TIMEOUT_MS = 15_000
#: One poll of the membership thread (it only carries the group protocol).
POLL_MS = 200
#: A member that has tasks revoked keeps running them this long before it commits and lets them
#: go, and only then joins the follow-up round that hands them over (KIP-429's second round).
#: Joining at once moves the group's generation on while the round's other members may still
#: be fetching their assignment of it: the dev broker (Tansu) answers a member's SyncGroup on a
#: one-second retry, and a SyncGroup of a generation moved on fails after five seconds, so the
#: member meant to receive the tasks missed the follow-up round and they waited one or two
#: rounds more, unowned (measured: 8 to 16 s instead of 4 to 5). The grace costs nothing in
#: processing: the tasks run on their old owner meanwhile, and the time they stop (from the
#: revoke to the new owner's start) is one round. A real Kafka answers every follower's
#: SyncGroup when the leader's arrives; there the grace only makes the move 1.5 s later.
HANDOVER_GRACE_S = 1.5
#: How often the revocation listener looks whether the container has let the tasks go.
ACK_POLL_S = 0.02
#: At close, how long (at most, and never past the session timeout) a member whose final input
#: offsets wait for a rebalance in flight to end keeps polling, so that they reach the group.
FINAL_OFFSETS_WAIT_S = 10.0
#: The member holds its tasks once the broker has not answered a heartbeat for this share of
#: the session timeout (heartbeats go every fifth of it): past it, the broker may already have
#: handed the tasks to another member.
LEASE_SHARE = 0.5


@dataclass
class Rebalance:
    """What one or more completed rebalances changed for this member.

    Attributes:
        revoked: tasks given to others: commit them, then let them go.
        lost: tasks lost with the membership (session expired): drop them without a commit,
            another member may own them already.
        assigned: tasks newly given to this member.
        assignment: the member's whole share after the rebalance (actives, standbys, the
            task -> endpoint map), ``None`` when no assignment arrived.
    """

    revoked: set[int] = field(default_factory=set)
    lost: set[int] = field(default_factory=set)
    assigned: set[int] = field(default_factory=set)
    assignment: TaskAssignment | None = None

    def __bool__(self) -> bool:
        return bool(self.revoked or self.lost or self.assigned or self.assignment is not None)


def rebalance_timeout_ms(session_timeout_ms: int) -> int:
    """The rebalance timeout (ms) for a session timeout.

    How long the group waits for this member to rejoin in a rebalance, and the member for the
    answer to its JoinGroup (plus 5 s): see :data:`REBALANCE_TIMEOUT_SESSIONS`.
    """
    return max(MIN_REBALANCE_TIMEOUT_MS, REBALANCE_TIMEOUT_SESSIONS * session_timeout_ms)


class _Notes(AsyncConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python ships no types
    """Collects the listener calls of kafka-python's network thread for :meth:`GroupMembership.poll`.

    Async (awaited on the client's I/O loop), so that the member's heartbeats go on while a
    revocation waits for the handover grace and the container's commit.
    """

    def __init__(self, member: GroupMembership) -> None:
        self._member = member
        self._lock = threading.Lock()
        self.pending = Rebalance()
        self.acknowledged = threading.Event()

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        tasks = {tp.partition for tp in revoked}
        member = self._member
        if not member.closing:  # they run on here meanwhile (HANDOVER_GRACE_S)
            await member.sleep(member.handover_grace_s)
        with self._lock:
            self.acknowledged.clear()
            self.pending.revoked |= tasks - self.pending.assigned
            self.pending.assigned -= tasks
        # The container commits the tasks before the follow-up round gives them away (when
        # leaving, it has committed them already).
        if member.closing:
            return
        deadline = time.monotonic() + member.revoke_wait_s
        while not self.acknowledged.is_set() and time.monotonic() < deadline and not member.closing:
            await member.sleep(ACK_POLL_S)
        if not self.acknowledged.is_set():
            log.warning(
                "tasks %s: the container did not let them go within %.1fs; handing them over anyway "
                "(its next commit of them is fenced)",
                sorted(tasks),
                self._member.revoke_wait_s,
            )

    async def on_partitions_lost(self, lost: Iterable[TopicPartition]) -> None:
        tasks = {tp.partition for tp in lost}
        with self._lock:
            self.pending.lost |= tasks - self.pending.assigned
            self.pending.assigned -= tasks

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        assigned = list(assigned)
        self._member.pause(assigned)  # never read here: the container's consumer reads them
        with self._lock:
            tasks = {tp.partition for tp in assigned}
            self.pending.assigned |= tasks - self.pending.revoked - self.pending.lost
            self.pending.revoked -= tasks
            self.pending.lost -= tasks

    def take(self, assignment: TaskAssignment | None) -> Rebalance:
        with self._lock:
            taken, self.pending = self.pending, Rebalance()
        taken.assignment = assignment
        return taken


class GroupMembership:
    """This process's membership of the job's group.

    Args:
        job: the job (``job.coordinator.*``, ``job.standbytasks.replication.factor``).
        servers: bootstrap servers.
        inputs: the job's input topics (task ``N`` takes partition ``N`` of each).
        local_state: what this member holds now, asked at every join.
        instance_id: static membership (``--instance-id`` / ``job.coordinator.instance.id``).
        copy_lags: per task this member keeps a copy of, the changelog records the copy is
            behind its owner's committed state (``None``: not known yet); asked by the
            membership thread, so that it asks for a probe once its warm-up copies caught up.
    """

    def __init__(
        self,
        job: JobConfig,
        servers: str,
        inputs: list[str],
        local_state: Callable[[], LocalState],
        instance_id: str | None = None,
        copy_lags: Callable[[], Mapping[int, int | None]] | None = None,
    ) -> None:
        self.group_id = job.group_id
        self.instance_id = instance_id
        warmup = WarmupRules(job.acceptable_recovery_lag, job.max_warmup_replicas)
        self.assignor = TaskAssignor(inputs, job.standby_replication_factor - 1, local_state, warmup)
        self._probes = ProbeSchedule(job.probing_rebalance_interval_ms / 1000, job.acceptable_recovery_lag)
        self._copy_lags = copy_lags
        self._followed_up: TaskAssignment | None = None  # the last share whose withheld tasks we joined for
        self._notes = _Notes(self)
        self._seen_assignment: TaskAssignment | None = None
        self.rebalances = 0
        self.rebalance_started: float | None = None  # monotonic, while one is in progress
        self.last_rebalance_s: float | None = None
        self.last_rebalance_at: float | None = None  # epoch seconds
        self._consumer = KafkaConsumer(
            bootstrap_servers=servers,
            group_id=self.group_id,
            group_instance_id=instance_id,
            client_id=f"samzapy-{job.job_name}-member",
            partition_assignment_strategy=[self.assignor],
            session_timeout_ms=job.session_timeout_ms,
            heartbeat_interval_ms=max(100, job.session_timeout_ms // 5),
            max_poll_interval_ms=rebalance_timeout_ms(job.session_timeout_ms),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self._consumer.subscribe(inputs, listener=self._notes)
        self._state = group_state.coordinator_state(self._consumer)
        # A join that finishes between two of the membership thread's polls is not thrown away
        # (a kafka-python fault that cost a moved task extra rounds unowned: see there).
        group_state.keep_finished_joins(self._consumer)
        self._offsets_lock = threading.Lock()
        self._offsets_to_commit: dict[TopicPartition, int] | None = None
        self._session_s = job.session_timeout_ms / 1000
        self._lease_s = self._session_s * LEASE_SHARE
        self._lapsed_at: float | None = None  # monotonic, from a lapse until the group confirms
        self.revoke_wait_s = job.session_timeout_ms / 2000
        self.handover_grace_s = HANDOVER_GRACE_S
        self._state.allow_listener_time(self.handover_grace_s + self.revoke_wait_s + 1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-membership", daemon=True)
        self.failed: BaseException | None = None
        self.closing = False
        self._led = False  # this member has been the group leader (see close())
        log.info(
            "joining group %s%s (session timeout %d ms) for inputs %s",
            self.group_id,
            f" as static member {instance_id}" if instance_id else "",
            job.session_timeout_ms,
            ", ".join(inputs),
        )
        log.info(group_state.describe())

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Never fetch ``partitions`` with the membership consumer."""
        self._consumer.pause(*partitions)

    def sleep(self, seconds: float) -> Any:
        """An awaitable pause on kafka-python's I/O loop (for the rebalance listener)."""
        return self._state.sleep(seconds)

    def start(self) -> None:
        """Join the group; the membership is kept up by a background thread from now on."""
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._consumer.poll(timeout_ms=POLL_MS)  # paused partitions: no records, only the protocol
                self._led = self._led or self._state.leads()
                self._commit_offsets()
                self._maybe_follow_up()
                self._maybe_probe()
        except BaseException as error:  # handed to the run loop, which stops the container
            self.failed = error
            log.exception("group %s: the membership thread failed", self.group_id)

    def _maybe_follow_up(self) -> None:
        """Join the follow-up round at once when this member's share names tasks withheld for it.

        Their owner is revoking them (it runs them on for :data:`HANDOVER_GRACE_S`, then joins
        the follow-up round itself). Joining now, not when a heartbeat would tell, puts this
        member's join in that round before the owner's: on the dev broker a join that lands
        after the leader's join was answered starts one more round (seen under load, with the
        member's threads busy warming up copies), and the tasks wait for it unowned.
        """
        assignment = self.assignor.assignment
        if self.closing or assignment is None or not assignment.withheld or assignment is self._followed_up:
            return
        if self._state.stable_generation() is None:
            return  # in a join already: it carries this member into the next round
        self._followed_up = assignment
        log.info(
            "group %s: tasks %s are on their way here: joining the follow-up round",
            self.group_id,
            list(assignment.withheld),
        )
        self._state.request_rejoin()

    def _maybe_probe(self) -> None:
        """While this member warms up copies, ask for a rebalance when :class:`ProbeSchedule` says.

        At once when every warm-up copy here is within the acceptable lag (at most once per
        :data:`~samzapy.coordinator.warmup_probe.CAUGHT_UP_PROBE_FLOOR_S`), else every probing
        interval. The leader then moves a task whose copy here has caught up (KIP-441).
        """
        assignment = self.assignor.assignment
        warmups = () if assignment is None or self.closing else assignment.warmups
        if warmups and self._state.stable_generation() is None:
            return  # in a join already: it is the probe
        lags = {} if self._copy_lags is None or not warmups else self._copy_lags()
        reason = self._probes.due(warmups, lags, time.monotonic())
        if reason is None:
            return
        if reason == CAUGHT_UP:
            log.info(
                "group %s: the warm-up copies of tasks %s caught up (lags %s): probing rebalance",
                self.group_id,
                list(warmups),
                {t: lags.get(t) for t in warmups},
            )
        else:
            log.info(
                "group %s: probing rebalance: are the warm-up copies of tasks %s caught up?",
                self.group_id,
                list(warmups),
            )
        self._state.request_rejoin()

    def poll(self) -> Rebalance:
        """What the rebalances completed since the last call changed (empty when nothing did).

        Raises:
            KafkaError: the membership thread failed (the member is out of the group).
        """
        if self.failed is not None:
            raise self.failed
        self._note_timing()
        assignment = self.assignor.assignment
        fresh = assignment if assignment is not self._seen_assignment else None
        self._seen_assignment = assignment
        return self._notes.take(fresh)

    def _note_timing(self) -> None:
        rebalancing = not self.settled
        now = time.monotonic()
        if rebalancing and self.rebalance_started is None:
            self.rebalance_started = now
        elif not rebalancing and self.rebalance_started is not None:
            self.last_rebalance_s = now - self.rebalance_started
            self.last_rebalance_at = time.time()
            self.rebalance_started = None
            self.rebalances += 1

    @property
    def settled(self) -> bool:
        """Whether this member has an assignment and no rebalance is under way or asked for."""
        return (
            self.assignor.assignment is not None
            and self.assignor.assignment is self._seen_assignment  # handed to the container
            and not self._notes.pending
            and self._state.stable_generation() is not None
            and not self._state.rejoin_needed()
        )

    @property
    def generation(self) -> int | None:
        """The group generation this member is in, ``None`` while it is not stable."""
        return self._state.stable_generation()

    @property
    def member_id(self) -> str | None:
        """The id the group knows this member by (the static instance id when set)."""
        return self.instance_id or self._state.member_id()

    def lease_valid(self) -> bool:
        """Whether this member may still process and commit the tasks it holds (see :meth:`lease_problem`)."""
        return self.lease_problem() is None

    def lease_problem(self) -> str | None:
        """Why this member may not process or commit the tasks it holds now; ``None``: it may.

        It may not when the broker has not answered a heartbeat for :data:`LEASE_SHARE` of the
        session timeout (the process was paused, or cut off from the broker: the group may have
        moved the tasks already), when it fell out of the group, or while a loss of tasks is
        noted but not yet handed to the container. A join in flight keeps the lease: the broker
        holds a joining member's tasks until the round ends. Once lapsed, the lease comes back
        only when the group confirms the member: stable, no rejoin asked, an answer since the
        lapse (a broker may answer a member it has expired with "rebalance in progress").
        """
        if self._notes.pending.lost:
            return "the group took tasks from this member"
        state = self._state
        if not state.joined():
            # out of the group: harmless only before the first join (no tasks yet)
            return None if self.assignor.assignment is None else "this member is out of the group"
        now = time.monotonic()
        if self._lapsed_at is not None:
            confirmed = (
                state.stable_generation() is not None
                and not state.rejoin_needed()
                and state.seconds_since_answer() < now - self._lapsed_at
            )
            if not confirmed:
                return "waiting for the group to confirm this member"
            self._lapsed_at = None
            return None
        silent = state.seconds_since_answer()
        if state.rebalancing() or silent < self._lease_s:
            return None
        self._lapsed_at = now
        return (
            f"the broker has not answered this member for {silent:.1f}s (was the process paused, or cut off?)"
        )

    def commit_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        """Have the membership thread commit these input offsets to the group.

        Lag monitors read them; samzapy itself resumes from its checkpoints. Committed from that
        thread, not the caller's: a commit waits for kafka-python's network thread, which may be
        running a rebalance listener that waits for the caller.
        """
        with self._offsets_lock:
            self._offsets_to_commit = dict(offsets)

    def _commit_offsets(self) -> None:
        """Commit the offsets handed over last, when the group is stable.

        The broker refuses them from a stale generation, or for partitions this member no longer
        owns.
        """
        with self._offsets_lock:
            offsets = self._offsets_to_commit
            if not offsets or self.generation is None:
                return  # in a rebalance they stay, unless a newer commit replaces them
            self._offsets_to_commit = None
        owned = set(self._consumer.assignment())
        # kafka-python wants its own TopicPartition; samzapy's compares equal (the in).
        mine = {TopicPartition(*tp): OffsetAndMetadata(o, "", -1) for tp, o in offsets.items() if tp in owned}
        if not mine:
            return
        try:
            self._consumer.commit(mine)
        except KafkaError as error:
            # A rebalance that began since the check; the next commit carries the offsets.
            log.debug("group %s: input offsets not committed to the group: %s", self.group_id, error)

    def _await_final_offsets(self) -> None:
        """Keep polling while the final commit's offsets wait for a rebalance in flight to end.

        At the end of the input the members stop one after another, and each one's leaving
        starts a rebalance in which the others' final offsets cannot be committed (the broker
        takes them only from a stable generation); without this wait the group kept offsets one
        commit old for lag monitors to read. Bounded by :data:`FINAL_OFFSETS_WAIT_S` and the
        session timeout.
        """
        deadline = time.monotonic() + min(FINAL_OFFSETS_WAIT_S, self._session_s)
        while self._thread.is_alive() and time.monotonic() < deadline:
            with self._offsets_lock:
                if not self._offsets_to_commit:
                    return
            time.sleep(POLL_MS / 1000)
        if self._offsets_to_commit:
            log.info("group %s: the final input offsets wait for a rebalance: not committed", self.group_id)

    def acknowledge(self) -> None:
        """The container let the revoked tasks it was handed go: the rebalance may go on."""
        self._notes.acknowledged.set()

    def close(self) -> None:
        """Commit the input offsets handed over last, then leave the group.

        A static member does not leave: its tasks wait for it until the session timeout passes.
        Nor does the group leader, nor a member in the middle of a join (it may have just been
        made the leader): on the dev broker (Tansu 0.6) a leader that leaves while the group is
        forming (another member rejoined: a follow-up round, a probe, a newcomer) stays that
        round's leader, so the round never completes and the members that joined it wait in it
        for good, their new tasks unowned (seen about one run in twenty of
        test_members_crash_join_and_leave_under_load_and_counts_stay_exact, more often since a
        member joins the follow-up round at once). A leader that is dropped at its session
        timeout is dropped as the leader too, and the next member to join leads. Its tasks move
        one session timeout later than with a leave; Kafka Streams does not leave on close
        either (``internal.leave.group.on.close``).
        """
        self.closing = True
        self._await_final_offsets()
        self._stop.set()
        self._notes.acknowledged.set()
        self._thread.join(timeout=self.revoke_wait_s + 5)
        if not self._thread.is_alive():
            self._commit_offsets()  # those of the final commit
        state = self._state
        led = self._led or state.leads()
        if led or state.stable_generation() is None or state.rejoin_needed():
            log.info(
                "group %s: not leaving the group (%s): the others get this member's tasks after "
                "its session timeout",
                self.group_id,
                "it leads the group" if led else "it is in a join",
            )
            state.close_without_leaving(self._consumer)
            return
        self._consumer.close(autocommit=False)

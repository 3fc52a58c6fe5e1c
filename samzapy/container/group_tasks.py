"""A group-mode container's tasks, which come and go at runtime (``job.coordinator.factory=group``).

At every turn of the run loop :meth:`GroupTasks.poll` takes part in the group protocol
(:class:`~samzapy.coordinator.group.GroupMembership`) and hands what a rebalance changed to
the container's :class:`~samzapy.container.task_manager.TaskManager`:

- **revoked** tasks (moving to another member) are revoked: committed, with a local
  checkpoint of every store (host affinity: the task comes back cheap), then closed; their
  stores stay on disk. Only then does this member join the follow-up round that gives them away;
- **lost** tasks (the membership expired) are lost: dropped without a commit, as fenced ones are;
- **assigned** tasks are claimed (a new ownership generation, :mod:`samzapy.container.fencing`)
  and assigned: restored *in the background*, each in a thread of its own, while the member's
  other tasks keep processing; a restored task is started at the next turn;
- the **standby** set of the assignment becomes the manager's standby set.

The manager's listeners (inputs, async runner, head flusher, gauges, status) follow the
tasks, so that async tasks, side-input stores and ``flush.at.head`` stores run in group mode
as in passthrough mode. What group mode still refuses is checked with the configuration
(``samzapy/config/validation.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import JobConfig
from samzapy.container.held_state import held_state
from samzapy.container.loop import positions
from samzapy.container.task_manager import TaskManager
from samzapy.coordinator.assignor import LocalState, TaskAssignment
from samzapy.coordinator.group import GroupMembership
from samzapy.health import ContainerStatus
from samzapy.metrics import MetricsGroup
from samzapy.records import TopicPartition
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for

log = logging.getLogger(__name__)

#: How often a member whose lease lapsed asks the group again.
HOLD_POLL_S = 0.05
#: How often ``/health`` gets the membership state while nothing changes.
REPORT_EVERY_S = 1.0

#: Claims these tasks (a new ownership generation each); their claim records.
Claim = Callable[[list[str]], dict[str, TaskCheckpoint]]


class GroupTasks:
    """The member side of a group-mode container: its tasks follow the group's assignment.

    Args:
        job: the job's configuration.
        manager: the container's task manager (tasks arrive and leave only through it).
        servers: bootstrap servers.
        input_counts: partitions per input stream.
        task_count: the job's number of tasks.
        claim: takes tasks over (:meth:`samzapy.container.fencing.Fence.claim`, acknowledged).
        release: no longer owns tasks (:meth:`samzapy.container.fencing.Fence.release`).
        status: the container's status (``membership`` for ``/health``).
        metrics: the container's metrics group (rebalance counters and gauges).
        query_url: this member's query URL, announced to the leader (``None``: no queries).
        instance_id: the static member id, if any.
        copy_lags: how far behind each standby or warm-up copy here is
            (:meth:`~samzapy.container.task_followers.StandbyFollower.copy_lags`): the member asks
            for a probing rebalance once its warm-up copies caught up.
    """

    def __init__(
        self,
        job: JobConfig,
        manager: TaskManager,
        servers: str,
        input_counts: dict[SystemStream, int],
        task_count: int,
        *,
        claim: Claim,
        release: Callable[[list[str]], None],
        status: ContainerStatus,
        metrics: MetricsGroup,
        query_url: str | None,
        instance_id: str | None,
        copy_lags: Callable[[], Mapping[int, int | None]] | None = None,
    ) -> None:
        self._job = job
        self._tasks = manager
        self._task_count = task_count
        self._claim = claim
        self._release = release
        self._status = status
        self._query_url = query_url
        self.assignment: TaskAssignment | None = None
        self._assigned = metrics.counter("tasks-assigned")
        self._revoked = metrics.counter("tasks-revoked")
        self._lost = metrics.counter("tasks-lost")
        self._holds = metrics.counter("lease-holds")
        self._reported_rebalance: str | None = None
        self._reported_at = 0.0
        self.membership = GroupMembership(
            job, servers, sorted({s.stream for s in input_counts}), self._local_state, instance_id, copy_lags
        )
        metrics.gauge("group-generation", lambda: self.membership.generation)
        metrics.gauge("rebalances", lambda: self.membership.rebalances)
        metrics.gauge("rebalance-in-progress", lambda: int(self.membership.rebalance_started is not None))
        metrics.gauge("last-rebalance-s", lambda: self.membership.last_rebalance_s)
        metrics.gauge("tasks-restoring", lambda: len(manager.restoring()))
        self.membership.start()

    def _local_state(self) -> LocalState:
        """What this member holds, for the leader (asked on kafka-python's network thread)."""
        return LocalState(
            held=held_state(self._job, self._task_count),
            standbys=frozenset(self._tasks.standbys()),
            endpoint=self._query_url,
            rack=self._job.rack,
        )

    def restoring(self) -> list[int]:
        """The tasks being restored in the background now."""
        return self._tasks.restoring()

    @property
    def settled(self) -> bool:
        """No rebalance under way or asked for, and no task still restoring."""
        return self.membership.settled and not self._tasks.restoring()

    # ----------------------------------------------------------------- each turn
    def poll(self) -> None:
        """Take part in the group protocol and apply what changed (module docstring)."""
        change = self.membership.poll()
        if change.lost:
            self._let_go(sorted(change.lost), commit=False)
        if change.revoked:
            self._let_go(sorted(change.revoked), commit=True)
            self.membership.acknowledge()
        if change.assignment is not None:
            self.assignment = change.assignment
            self._tasks.stand_by(change.assignment.standbys)
            self._tasks.warm_up(change.assignment.warmups)  # KIP-441: copies before a move here
        if change.assigned:
            self._claim_and_restore(sorted(change.assigned))
        if self._tasks.start_restored() or change:
            self._log_share()
        self._report_membership()

    def _report_membership(self) -> None:
        """Report the member's group state for ``/health`` (``membership``).

        At most every :data:`REPORT_EVERY_S` unless the rebalance state changed.
        """
        member = self.membership
        rebalance = "stable" if member.rebalance_started is None else "in progress"
        now = time.monotonic()
        if rebalance == self._reported_rebalance and now - self._reported_at < REPORT_EVERY_S:
            return
        self._reported_rebalance, self._reported_at = rebalance, now
        self._status.membership(
            {
                "group": member.group_id,
                "member": member.member_id,
                "generation": member.generation,
                "rebalance": rebalance,
                "rebalances": member.rebalances,
                "last_rebalance_s": member.last_rebalance_s,
                "last_rebalance_at": member.last_rebalance_at,
                "tasks_assigned": self._assigned.value,
                "tasks_revoked": self._revoked.value,
                "tasks_lost": self._lost.value,
                "tasks_restoring": self._tasks.restoring(),
                "standbys": self._tasks.standbys(),
                "lease_holds": self._holds.value,
            }
        )

    def hold(self, stopping: Callable[[], bool]) -> bool:
        """Block while this member's lease has lapsed (:meth:`GroupMembership.lease_valid`).

        Nothing is processed or committed until the group confirms the member again; tasks it
        lost meanwhile, or that the fence says another member claimed, are dropped. Returns
        whether the lease holds (``False`` only when a stop was asked while waiting).
        """
        problem = self.membership.lease_problem()
        if problem is None:
            return True
        log.warning(
            "group %s: %s: holding tasks %s until the group confirms this member",
            self.membership.group_id,
            problem,
            self._running() or "none",
        )
        self._holds.inc()
        while not stopping():
            self.poll()
            if self.membership.lease_valid():
                # The group confirms the member, but another may have claimed its tasks while
                # it was away (a broker can answer an expired member's heartbeat): ask the fence.
                self._tasks.drop_fenced()
                log.info(
                    "group %s: the group confirms this member; going on with tasks %s",
                    self.membership.group_id,
                    self._running() or "none",
                )
                return True
            time.sleep(HOLD_POLL_S)
        return False

    def _running(self) -> list[int]:
        return [t.partition for t in self._tasks.running()]

    def _log_share(self) -> None:
        log.info(
            "group %s generation %s: running tasks %s, restoring %s, standbys %s, warming up %s",
            self.membership.group_id,
            self.membership.generation,
            self._running() or "none",
            self._tasks.restoring() or "none",
            self._tasks.standbys() or "none",
            self._tasks.warming_up() or "none",
        )

    # ----------------------------------------------------------------- tasks moving
    def _let_go(self, partitions: list[int], *, commit: bool) -> None:
        """Revoke (``commit``) or lose the tasks of ``partitions``; stores stay on disk."""
        (self._revoked if commit else self._lost).inc(len(partitions))
        if commit:
            self._tasks.revoke(partitions)
        else:
            self._tasks.lose(partitions)
        self._release([task_name_for(p) for p in partitions])
        what = "revoked: committed and closed, stores kept on disk" if commit else "lost: dropped"
        log.info("tasks %s %s", ", ".join(task_name_for(p) for p in partitions), what)

    def _claim_and_restore(self, partitions: list[int]) -> None:
        """Claim the tasks, then have the manager restore each in a background thread."""
        claimed = self._claim([task_name_for(p) for p in partitions])
        self._assigned.inc(len(partitions))
        self._tasks.assign({p: claimed.get(task_name_for(p)) for p in partitions})

    # ----------------------------------------------------------------- commit and close
    def commit_offsets(self) -> None:
        """Commit the tasks' input offsets to the group too (lag monitors read them)."""
        offsets: dict[TopicPartition, int] = {}
        for ssp, offset in positions(self._tasks.running()).items():
            assert isinstance(ssp, SystemStreamPartition)
            offsets[TopicPartition(ssp.stream, ssp.partition)] = offset
        self.membership.commit_offsets(offsets)

    def close(self) -> None:
        """Leave the group (the manager closes the tasks, restoring ones and standbys)."""
        self.membership.close()

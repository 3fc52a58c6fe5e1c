"""A group-mode container's tasks, which come and go at runtime (``job.coordinator.factory=group``).

At every turn of the run loop :meth:`GroupTasks.poll` takes part in the group protocol
(:class:`~samzapy.coordinator.group.GroupMembership`) and applies what a rebalance changed:

- **revoked** tasks (moving to another member) are committed, with a local checkpoint of
  every store (host affinity: the task comes back cheap), then closed; their stores stay on
  disk. Only then does this member join the follow-up round that gives them away;
- **lost** tasks (the membership expired) are dropped without a commit, as fenced ones are;
- **assigned** tasks are claimed (a new ownership generation, :mod:`samzapy.container.fencing`)
  and restored *in the background*, each in a thread of its own, while the member's other
  tasks keep processing; a restored task is initialised and starts reading its inputs at the
  next turn;
- the **standby** set of the assignment replaces the running standby replicas.

Group mode runs sync ``StreamTask`` jobs. Async tasks, stores with side inputs, the Spark
restore engine and ``flush.at.head`` stores are refused at start (:func:`check_group_mode`):
their parts of the container are built once, for the tasks known at start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import JobConfig
from samzapy.container.held_state import held_state
from samzapy.container.loop import positions, processed
from samzapy.container.standby import StandbyReplicas, adopt_standby_checkpoints
from samzapy.container.startup import input_partitions
from samzapy.coordinator.assignor import LocalState, TaskAssignment
from samzapy.coordinator.group import GroupMembership
from samzapy.errors import ConfigError
from samzapy.records import TopicPartition
from samzapy.reporters.container_metrics import register_input_gauges, register_task_gauges
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for
from samzapy.task import AsyncStreamTask

log = logging.getLogger(__name__)

#: How often a member whose lease lapsed asks the group again.
HOLD_POLL_S = 0.05
#: How often ``/health`` gets the membership state while nothing changes.
REPORT_EVERY_S = 1.0


def check_group_mode(job: JobConfig) -> None:
    """Refuse, before anything starts, what group mode does not run yet.

    Raises:
        ConfigError: naming the setting and what to do instead.
    """
    problems = []
    if issubclass(job.task_type, AsyncStreamTask):
        problems.append(f"task.class {job.task_class} is an AsyncStreamTask")
    for store in job.stores.values():
        if store.has_side_inputs:
            problems.append(f"store '{store.name}' has side inputs")
        if store.restore_engine == "spark":
            problems.append(f"store '{store.name}' restores with Spark (stores.{store.name}.restore.engine)")
        if store.flush_at_head:
            problems.append(f"store '{store.name}' sets stores.{store.name}.flush.at.head")
    if problems:
        msg = (
            "job.coordinator.factory=group runs sync StreamTask jobs whose stores restore from their "
            f"changelogs; this job: {'; '.join(problems)}. Run it with job.coordinator.factory=passthrough "
            "(job.container.count and --container-id)"
        )
        raise ConfigError(msg)


@dataclass
class _Restore:
    """A task being restored in the background."""

    partition: int
    checkpoint: TaskCheckpoint | None
    processed_at_start: dict[str, int]  # the member's running tasks: messages processed so far
    started: float = field(default_factory=time.monotonic)
    stores: dict[str, Any] | None = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class GroupTasks:
    """The member side of a group-mode container: its tasks follow the group's assignment.

    Args:
        container: the started :class:`~samzapy.container.run_loop.Container` (its tasks,
            inputs, fence, commit, builder and producer are used and changed here).
        servers: bootstrap servers.
        input_counts: partitions per input stream.
        task_count: the job's number of tasks.
        make_instance: builds a restored task's ``TaskInstance`` (``init`` called).
    """

    def __init__(
        self,
        container: Any,
        servers: str,
        input_counts: dict[SystemStream, int],
        task_count: int,
        make_instance: Any,
        instance_id: str | None,
    ) -> None:
        self._c = container
        self._job: JobConfig = container.job
        self._servers = servers
        self._input_counts = input_counts
        self._task_count = task_count
        self._make_instance = make_instance
        self._restoring: dict[int, _Restore] = {}
        self._standbys: tuple[int, ...] = ()
        self._standby_replicas: StandbyReplicas | None = None
        self.assignment: TaskAssignment | None = None
        metrics = container.metrics
        self._assigned = metrics.counter("tasks-assigned")
        self._revoked = metrics.counter("tasks-revoked")
        self._lost = metrics.counter("tasks-lost")
        self._holds = metrics.counter("lease-holds")
        self._reported_rebalance: str | None = None
        self._reported_at = 0.0
        self.membership = GroupMembership(
            self._job, servers, sorted({s.stream for s in input_counts}), self._local_state, instance_id
        )
        metrics.gauge("group-generation", lambda: self.membership.generation)
        metrics.gauge("rebalances", lambda: self.membership.rebalances)
        metrics.gauge("rebalance-in-progress", lambda: int(self.membership.rebalance_started is not None))
        metrics.gauge("last-rebalance-s", lambda: self.membership.last_rebalance_s)
        metrics.gauge("tasks-restoring", lambda: len(self._restoring))
        self.membership.start()

    def _local_state(self) -> LocalState:
        """What this member holds, for the leader (asked on kafka-python's network thread)."""
        return LocalState(
            held=held_state(self._job, self._task_count),
            standbys=frozenset(self._standbys),
            endpoint=self._c.query_url,
            rack=self._job.rack,
        )

    def restoring(self) -> list[int]:
        """The tasks being restored in the background now."""
        return sorted(self._restoring)

    @property
    def settled(self) -> bool:
        """No rebalance under way or asked for, and no task still restoring."""
        return self.membership.settled and not self._restoring

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
            self._follow_standbys(change.assignment.standbys)
        if change.assigned:
            self._claim_and_restore(sorted(change.assigned))
        if self._start_restored() or change:
            self._log_share()
        self._report_membership()

    def _report_membership(self) -> None:
        """The member's group state for ``/health`` (``membership``), at most every
        :data:`REPORT_EVERY_S` unless the rebalance state changed."""
        member = self.membership
        rebalance = "stable" if member.rebalance_started is None else "in progress"
        now = time.monotonic()
        if rebalance == self._reported_rebalance and now - self._reported_at < REPORT_EVERY_S:
            return
        self._reported_rebalance, self._reported_at = rebalance, now
        self._c.status.membership(
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
                "tasks_restoring": sorted(self._restoring),
                "standbys": list(self._standbys),
                "lease_holds": self._holds.value,
            }
        )

    def hold(self, stopping: Callable[[], bool]) -> bool:
        """Block while this member's lease has lapsed (:meth:`GroupMembership.lease_valid`):
        nothing is processed or committed until the group confirms the member again; tasks it
        lost meanwhile, or that the fence says another member claimed, are dropped. Returns
        whether the lease holds (``False`` only when a stop was asked while waiting)."""
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
                self._c.drop_fenced()
                log.info(
                    "group %s: the group confirms this member; going on with tasks %s",
                    self.membership.group_id,
                    self._running() or "none",
                )
                return True
            time.sleep(HOLD_POLL_S)
        return False

    def _running(self) -> list[int]:
        return sorted(t.partition for t in self._c.tasks)

    def _log_share(self) -> None:
        running = self._running()
        log.info(
            "group %s generation %s: running tasks %s, restoring %s, standbys %s",
            self.membership.group_id,
            self.membership.generation,
            running or "none",
            sorted(self._restoring) or "none",
            list(self._standbys) or "none",
        )

    # ----------------------------------------------------------------- tasks leaving
    def _let_go(self, partitions: list[int], *, commit: bool) -> None:
        """Commit (``commit``) and close the tasks of ``partitions``; stores stay on disk."""
        counter = self._revoked if commit else self._lost
        counter.inc(len(partitions))
        for partition in partitions:
            restore = self._restoring.pop(partition, None)
            if restore is not None:  # never started: nothing to commit, close what was built
                restore.done.wait()
                for store in (restore.stores or {}).values():
                    store.close()
        leaving = [t for t in self._c.tasks if t.partition in partitions]
        if leaving:
            self._c.release_tasks(leaving, commit=commit)
        self._c.fence_release([task_name_for(p) for p in partitions])
        what = "revoked: committed and closed, stores kept on disk" if commit else "lost: dropped"
        log.info("tasks %s %s", ", ".join(task_name_for(p) for p in partitions), what)

    # ----------------------------------------------------------------- tasks arriving
    def _claim_and_restore(self, partitions: list[int]) -> None:
        """Claim the tasks, then restore each in a background thread."""
        names = [task_name_for(p) for p in partitions]
        claimed = self._c.claim_tasks(names)
        adopt_standby_checkpoints(self._job, partitions)
        self._assigned.inc(len(partitions))
        for partition in partitions:
            restore = _Restore(partition, claimed.get(task_name_for(partition)), self._processed_by_task())
            self._restoring[partition] = restore
            self._c.status.task_state(task_name_for(partition), "restoring")
            threading.Thread(
                target=self._restore, args=(restore,), name=f"restore-{partition}", daemon=True
            ).start()

    def _processed_by_task(self) -> dict[str, int]:
        return {t.task_name: processed([t]) for t in self._c.tasks}

    def _restore(self, restore: _Restore) -> None:
        try:
            restore.stores = self._c.builder.stores(restore.partition, restore.checkpoint, restore=True)
        except BaseException as error:  # handed to the loop's thread, which raises it
            restore.error = error
        finally:
            restore.done.set()

    def _start_restored(self) -> bool:
        """Start the tasks whose restore finished: ``init``, then their inputs join the poll;
        whether any started."""
        started = False
        for partition, restore in sorted(self._restoring.items()):
            if not restore.done.is_set():
                continue
            del self._restoring[partition]
            if restore.error is not None:
                raise restore.error
            instance = self._make_instance(partition, restore.stores)
            self._c.tasks.append(instance)
            inputs = self._c.inputs
            checkpoints = {instance.task_name: restore.checkpoint} if restore.checkpoint else {}
            parts = input_partitions(self._job, inputs.consumer, [instance], self._input_counts, checkpoints)
            instance.offsets.update({p.ssp: p.start_offset for p in parts})
            inputs.add(parts, positions(self._c.tasks))
            register_task_gauges(instance)
            register_input_gauges(self._c.registry, inputs.consumer, parts)
            self._c.status.task_state(instance.task_name, "running")
            paused_s = time.monotonic() - restore.started  # the task's pause on its way here
            instance.metrics.gauge("rebalance-pause-s").set(round(paused_s, 3))
            now_processed = self._processed_by_task()
            meanwhile = sum(
                n - restore.processed_at_start[t]
                for t, n in now_processed.items()
                if t in restore.processed_at_start
            )
            log.info(
                "%s: restored in %.1fs in the background, while this member's other tasks processed %d "
                "messages; processing",
                instance.task_name,
                paused_s,
                meanwhile,
            )
            started = True
        return started

    # ----------------------------------------------------------------- standbys
    def _follow_standbys(self, standbys: tuple[int, ...]) -> None:
        if tuple(sorted(standbys)) == self._standbys:
            return
        if self._standby_replicas is not None:
            self._standby_replicas.stop()
            self._standby_replicas = None
        self._standbys = tuple(sorted(standbys))
        if self._standbys:
            self._standby_replicas = StandbyReplicas.start(
                self._job, list(self._standbys), self._servers, self._c.registry, self._c.status
            )

    # ----------------------------------------------------------------- commit and close
    def commit_offsets(self) -> None:
        """Commit the tasks' input offsets to the group too (lag monitors read them)."""
        offsets: dict[TopicPartition, int] = {}
        for ssp, offset in positions(self._c.tasks).items():
            assert isinstance(ssp, SystemStreamPartition)
            offsets[TopicPartition(ssp.stream, ssp.partition)] = offset
        self.membership.commit_offsets(offsets)

    def close(self) -> None:
        """Stop the standbys and restores, and leave the group."""
        if self._standby_replicas is not None:
            self._standby_replicas.stop()
        for restore in self._restoring.values():
            restore.done.wait()
            for store in (restore.stores or {}).values():
                store.close()
        self._restoring.clear()
        self.membership.close()

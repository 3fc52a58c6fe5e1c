"""Fencing zombie containers with ownership generations (MillWheel's sequencer tokens).

Every task checkpoint carries the *generation* of the ownership that wrote it and the
*claimant* (one id per container process) that owns that generation. A container that takes
a task over claims it before it restores or processes anything (:meth:`Fence.claim`):

1. it writes a claim record, a checkpoint with the offsets it will restore to, generation
   ``G = (highest generation of the task in the topic) + 1`` and its claimant id;
2. it reads the topic back to its end. Kafka has no conditional write, so two containers
   that start together may both claim ``G``; the log orders them, and *the first record of
   generation G in the log wins* (every reader applies the same rule, see
   :class:`samzapy.checkpoint.CheckpointFold`, so a losing claim record is never anyone's
   checkpoint);
3. a loser claims again, one generation above the highest it has now seen, from the
   winner's checkpoint (so the latest starter ends up owning the task, as with any takeover:
   the winner of ``G`` is fenced at its first commit). After :data:`MAX_CLAIM_ROUNDS` lost
   rounds it gives up with a :class:`FencingError` (containers keep starting with the same
   ``--container-id``). A claim that wins but is already overtaken by a higher generation
   when read back is reported by the first :meth:`Fence.lost`.

Under compaction (issue 28): records are keyed by task, generation and claimant
(:func:`samzapy.checkpoint.checkpoint_key`), every commit's checkpoint names the offset of its
owner's claim, and from the second commit of a generation on (the first one is durable then)
it carries tombstones of the lower generations' keys and of lost claims'
(:meth:`Fence.checkpoint`), so a compacted topic reads as the full one.

So a generation is owned by exactly one container. Before each commit, before any store is
flushed, the container reads what was appended since it last looked (:meth:`Fence.lost`): a
checkpoint of one of its tasks with a higher generation means another container took the task
over, and the task is dropped at once, without flushing its stores and without a checkpoint.

What this guarantees: a container that was stopped (SIGSTOP, a long GC pause, a network
partition) and then resumes writes no checkpoint and no store flush after a takeover it can
see, and a checkpoint it wrote after a takeover it could not see (one between its check and
its writes) never wins: readers take the newest checkpoint of the highest generation. In
passthrough mode a :class:`SendGate` also checks before a send once the last check is older
than :data:`SEND_LEASE_S` (a stopped process always comes back past it), so a zombie stops
sending outputs and changelog records at its first send after the takeover and exits 1
(:class:`ContainerFenced`). What is left: sends within the lease of the last check that passed,
and records the producer held unsent when the process was stopped (docs/operations.md,
"Fencing"). Changelog readers skip such records by their generation header.

The changelog: every changelog record carries its writer's generation in a header, and every
commit's checkpoint a *fence*: the generation and the changelog offsets it was claimed at.
Readers (restore, standbys) skip records of a lower generation after those offsets
(:class:`samzapy.checkpoint.ChangelogFence`); a restore rewrites the keys of the records it
skipped with their committed values, so the records before the next fence need no rule.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from samzapy.checkpoint import CheckpointFold, CheckpointWriter, TaskCheckpoint
from samzapy.errors import CheckpointError
from samzapy.kafka.outage import is_unreachable
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.records import TopicPartition

log = logging.getLogger(__name__)

#: How long one read of the checkpoint topic may wait for the broker.
REQUEST_TIMEOUT_MS = 10_000
#: How many lost claim races :meth:`Fence.claim` retries before it gives up.
MAX_CLAIM_ROUNDS = 5
#: How long a fencing check lets a passthrough container send before a send checks again
#: (:class:`SendGate`): the longest a running zombie goes on sending after a takeover.
SEND_LEASE_S = 1.0


class FencingError(CheckpointError):
    """A task could not be claimed: other containers' claims kept landing first."""


class ContainerFenced(FencingError):
    """Another container took tasks of this one over: it stops sending and exits non-zero.

    ``taken``: task name -> (its generation now, the claimant that owns it).
    """

    def __init__(self, taken: dict[str, tuple[int, str | None]]) -> None:
        self.taken = taken
        named = "; ".join(
            f"{task} by {owner or 'a tool'} (generation {generation})"
            for task, (generation, owner) in sorted(taken.items())
        )
        msg = (
            f"fenced: tasks taken over by another container: {named}. This container stopped "
            "sending at once and stops without a commit (the new owner goes on from its own "
            "checkpoint); if that other container was started by mistake, stop it and start this one again"
        )
        super().__init__(msg)


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """Run ``method`` holding the fence's lock (the send gate's thread reads the topic too)."""

    @functools.wraps(method)
    def locked(self: Fence, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked  # type: ignore[return-value]


def new_claimant() -> str:
    """A claimant id unique to this process and call: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Fence:
    """The generations this container owns, and the tail of the checkpoint topic it has read.

    Args:
        servers: bootstrap servers to read the checkpoint topic from.
        topic: the job's checkpoint topic (one partition).
        start: where to start reading the topic (0: the whole topic, which :meth:`claim`
            needs to see every claim of a generation).
    """

    def __init__(self, servers: str, topic: str, start: int = 0) -> None:
        # A short request timeout: an unreachable broker fails one fencing read in seconds, so
        # that the retries (samzapy.kafka.outage) log and notice a stop request promptly.
        self._consumer = reader_consumer(servers, request_timeout_ms=REQUEST_TIMEOUT_MS)
        self._servers = servers
        self._tp = TopicPartition(topic, 0)
        self._position = start
        self._fold = CheckpointFold()
        self._overtaken: dict[str, int] = {}  # won, but a higher generation came right after
        self._claimed: dict[str, TaskCheckpoint] = {}  # the claim record of each owned task
        self._committed: set[str] = set()  # owned tasks with a commit's checkpoint built
        self.claimant = new_claimant()
        self.generations: dict[str, int] = {}
        #: The passthrough container's send gate: every read of the topic renews its lease.
        self.gate: SendGate | None = None
        # The run loop and the send gate (on whichever thread sends) both read the topic.
        self._lock = threading.RLock()

    @_locked
    def claim(
        self, task_names: list[str], checkpoints: dict[str, TaskCheckpoint], writer: CheckpointWriter
    ) -> dict[str, TaskCheckpoint]:
        """Take the tasks over (steps 1-3 of the module docstring).

        Returns each task's claim record, which names the offsets to restore to. It equals
        ``checkpoints[name]`` (with the new generation) unless a claim race was lost: then the
        caller must restore from the returned one. ``writer`` is the container's
        :class:`CheckpointWriter`; it is flushed here.

        Raises:
            FencingError: a task lost :data:`MAX_CLAIM_ROUNDS` claim races in a row.
        """
        claimed: dict[str, TaskCheckpoint] = {}
        pending = list(task_names)
        for attempt in range(1, MAX_CLAIM_ROUNDS + 1):
            records = {name: self._claim_record(name, checkpoints, attempt) for name in pending}
            for record in records.values():
                writer.write(record)
            writer.flush()
            self._read()
            pending = []
            for name, record in records.items():
                owner = self._fold.owner(name, record.generation)
                if owner != self.claimant:
                    log.warning(
                        "%s: generation %d was claimed first by %s; claiming again (round %d of %d)",
                        name, record.generation, owner, attempt, MAX_CLAIM_ROUNDS,
                    )  # fmt: skip
                    pending.append(name)
                    continue
                self.generations[name] = record.generation
                claimed[name] = self._claimed[name] = record
                highest = self._fold.highest_seen(name)
                if highest > record.generation:
                    self._overtaken[name] = highest
                log.info("%s: owned with generation %d (claimant %s)", name, record.generation, self.claimant)
            if not pending:
                return claimed
        msg = (
            f"tasks {', '.join(pending)}: other containers' claims of their ownership landed first "
            f"{MAX_CLAIM_ROUNDS} times in a row on {self._tp.topic}; is another container with the "
            "same --container-id starting again and again? Stop it, then start this one"
        )
        raise FencingError(msg)

    def _claim_record(
        self, name: str, checkpoints: dict[str, TaskCheckpoint], attempt: int
    ) -> TaskCheckpoint:
        """The claim of ``name``.

        From the caller's checkpoint in the first round, from the winner's (the topic as read
        back) after a lost race.
        """
        if attempt == 1:
            base = checkpoints.get(name) or TaskCheckpoint(name)
        else:
            base = self._fold.checkpoints.get(name) or TaskCheckpoint(name)
        generation = max(base.generation, self._fold.highest_seen(name)) + 1
        # The claim's state is the base's: it keeps the base's changelog fence (restore skips
        # what the base's readers skip); the new generation's own fence starts at its commits.
        return TaskCheckpoint(
            name,
            dict(base.input_offsets),
            dict(base.changelog_offsets),
            generation,
            self.claimant,
            base.fence_generation,
            dict(base.fence_offsets),
            dict(base.snapshots),  # the base's newest snapshots stay named (stores/snapshots.py)
        )

    @_locked
    def checkpoint(
        self, task_name: str, input_offsets: dict[Any, int], changelog_offsets: dict[str, int | None]
    ) -> TaskCheckpoint:
        """A commit's checkpoint of ``task_name``, stamped with its generation, claimant and fence.

        Readers skip records of lower generations after the changelog offsets the task was
        claimed at (``samzapy.checkpoint.ChangelogFence``).
        """
        generation = self.generations[task_name]
        claimed = self._claimed[task_name].changelog_offsets
        checkpoint = TaskCheckpoint(
            task_name, input_offsets, changelog_offsets, generation, self.claimant, generation, dict(claimed)
        )
        checkpoint.claim_offset = self._fold.claim_offset(task_name, generation, self.claimant)
        # Older generations' keys (and lost claims') go once a commit of this generation is
        # durable: when the next one is built, the previous commit was flushed (a commit
        # flushes before it returns). Until then the claim record alone would stand for it.
        if task_name in self._committed:
            checkpoint.supersedes = self._fold.superseded(task_name, generation, self.claimant)
        self._committed.add(task_name)
        return checkpoint

    @_locked
    def lost(self) -> dict[str, int]:
        """Tasks another container took over since the last call: name -> its generation.

        Safe to call again after it raised (an unreachable broker): what was read is kept.
        With a :class:`SendGate`, a task taken over also shuts the gate: no send after it.
        """
        taken = self._taken_over()
        self._overtaken.clear()
        if taken and self.gate is not None:
            self.gate.shut(self.owners(taken))
        for name in taken:
            del self.generations[name]
            self._committed.discard(name)
        return taken

    @_locked
    def taken_over(self) -> dict[str, int]:
        """Tasks another container has taken over (name -> its generation), read from the topic now.

        Without letting go of them (:meth:`lost` does).
        """
        return self._taken_over()

    @_locked
    def owners(self, taken: dict[str, int]) -> dict[str, tuple[int, str | None]]:
        """Each task of ``taken`` with its generation and the claimant that owns it."""
        return {name: (generation, self._fold.owner(name, generation)) for name, generation in taken.items()}

    def _taken_over(self) -> dict[str, int]:
        self._read()
        taken = {name: g for name, g in self._overtaken.items() if name in self.generations}
        for name, mine in self.generations.items():
            highest = self._fold.highest_seen(name)
            if highest > mine:
                taken[name] = highest
        return taken

    @_locked
    def current(self) -> dict[str, TaskCheckpoint]:
        """Every task's checkpoint as the topic holds it now (read to its end)."""
        self._read()
        return dict(self._fold.checkpoints)

    @_locked
    def release(self, task_names: list[str]) -> None:
        """Stop owning these tasks (handed to another container, which claims them anew)."""
        for name in task_names:
            self.generations.pop(name, None)
            self._claimed.pop(name, None)
            self._overtaken.pop(name, None)
            self._committed.discard(name)

    def _read(self) -> None:
        """Fold in what was appended to the topic since the last read.

        This renews the gate's lease: what was read is at least as fresh as the moment the read
        began.
        """
        started = time.monotonic()
        with self._lock:
            for batch in read_partition(self._consumer, self._tp, self._position):
                for record in batch:
                    self._position = record.offset + 1
                    self._fold.add_record(record, self._tp.topic)
        if self.gate is not None:
            self.gate.renew(started)

    def close(self) -> None:
        """Stop the send gate's thread, then close the reader."""
        if self.gate is not None:
            self.gate.close()
        with self._lock:
            self._consumer.close()


class SendGate:
    """Passthrough mode: a send goes out only while a recent fencing check allows it.

    Recent: younger than the lease (:data:`SEND_LEASE_S`); the check said this container still
    owns its tasks (issue 28 item 3).

    :class:`samzapy.kafka.producer.Producer` asks it before every send: when the lease has
    run out (no check for ``lease_s``; also after the process was stopped, a SIGSTOP or a long
    pause, since the clock went on) it checks the checkpoint topic first. :meth:`start` renews
    the lease from a thread of its own meanwhile, so that sends of a running container do not
    wait for those reads. Once a check shows
    a task taken over, the gate is shut: that send and every later one raise
    :class:`ContainerFenced`, which stops the container with exit code 1 and names the tasks
    and their new owners. Commits' fencing checks renew the lease and shut the gate too.

    What still goes out after a takeover: sends within ``lease_s`` of the last check that
    passed, and records the producer held unsent when the process was stopped (kafka-python's
    sender thread sends them on resume, before any check can run).

    Group mode has no gate: a member that lost some tasks drops them and goes on with the
    others (its lease on the group assignment holds its tasks after a pause).
    """

    def __init__(self, fence: Fence, lease_s: float = SEND_LEASE_S) -> None:
        self._fence = fence
        self.lease_s = lease_s
        #: The monotonic time until which a send needs no check (0: check at the next send).
        self.open_until = 0.0
        self.error: ContainerFenced | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        fence.gate = self

    def start(self) -> SendGate:
        """Renew the lease from a thread of its own, every quarter lease.

        So a running container's sends never wait for a read of the checkpoint topic (one broker
        round trip or two); they still do after the process was stopped, when the lease ran out.
        The thread reads with a reader of its own: a read it waits on (the broker unreachable)
        never holds up the commit's fencing check.
        """
        fence = self._fence
        watcher = Fence(fence._servers, fence._tp.topic)
        self._thread = threading.Thread(
            target=self._renew, args=(watcher,), name="samzapy-send-gate", daemon=True
        )
        self._thread.start()
        return self

    def _renew(self, watcher: Fence) -> None:
        try:
            while self.error is None and not self._stop.wait(self.lease_s / 4):
                started = time.monotonic()
                try:
                    watcher._read()
                except Exception as exc:  # the broker unreachable: a send's own check reports it
                    log.debug("send gate: the background fencing read failed: %s", exc)
                    continue
                mine = dict(self._fence.generations)  # what this container owns now
                taken = {
                    n: watcher._fold.highest_seen(n)
                    for n, g in mine.items()
                    if watcher._fold.highest_seen(n) > g
                }
                if taken:
                    self.shut(watcher.owners(taken))
                else:
                    self.renew(started)
        finally:
            watcher.close()

    def close(self) -> None:
        """Stop the renewing thread (a send after this checks for itself)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=REQUEST_TIMEOUT_MS / 1000 + 1)

    def check(self) -> None:
        """Check the fence (the producer calls this when :attr:`open_until` has passed).

        Raises:
            ContainerFenced: the gate is shut (now or before).
        """
        if self.error is None:
            try:
                taken = self._fence.taken_over()
            except Exception as exc:
                if not is_unreachable(exc):
                    raise
                # The broker does not answer: the send goes on (kafka-python queues it, and the
                # commit waits the outage out, samzapy.kafka.outage); ask again after a lease
                # instead of making every send wait for the read's timeout.
                log.warning("fencing check before a send: the broker did not answer (%s); sending on", exc)
                self.open_until = time.monotonic() + self.lease_s
                return
            if taken:
                self.shut(self._fence.owners(taken))
        if self.error is not None:
            raise self.error

    def renew(self, checked_at: float) -> None:
        """A fencing read that began at ``checked_at`` passed (unless the gate is shut)."""
        if self.error is None:
            self.open_until = max(self.open_until, checked_at + self.lease_s)

    def shut(self, taken: dict[str, tuple[int, str | None]]) -> None:
        """No send from now on: ``taken`` (task -> generation, owner) were taken over."""
        if self.error is None:
            self.error = ContainerFenced(taken)
            self.open_until = 0.0
            log.error("%s", self.error)

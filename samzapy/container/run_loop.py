"""The container: builds the tasks of this container, restores their stores, runs the loop
of poll -> process -> window -> commit, and shuts down cleanly.

Commit protocol (DESIGN §6), in this order, for all tasks of the container at once:

1. flush every store's object cache down to the engine and the changelog producer;
2. flush the producer: every changelog and output record is acknowledged by the broker;
3. take a local checkpoint of the RocksDB stores due for one, named by its changelog offset
   (every store at every commit by default; ``stores.S.local.checkpoint.ms`` spreads them over
   commits, see ``samzapy.container.checkpoint_schedule``);
4. write each task's checkpoint (input next-offsets + store changelog offsets) to the
   checkpoint topic and wait for its acknowledgement.

A crash anywhere leaves the last checkpoint consistent: on restart, stores are rolled back to
exactly the checkpointed changelog offsets and input resumes at the checkpointed offsets.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from kafka import TopicPartition

from samzapy import stopping
from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoints
from samzapy.config import JobConfig
from samzapy.container.async_runner import AsyncRunner
from samzapy.container.checkpoint_schedule import LocalCheckpointSchedule
from samzapy.container.collector import OutputStreams, TaskCollector
from samzapy.container.fencing import Fence
from samzapy.container.head_flush import HeadFlusher
from samzapy.container.inputs import InputPartition, Inputs
from samzapy.container.side_inputs import SideInputs
from samzapy.container.standby import StandbyReplicas, adopt_standby_checkpoints
from samzapy.container.task_instance import ErrorPolicy, MessageFailure, TaskInstance
from samzapy.context import StoreContext
from samzapy.crashpoints import crash_point
from samzapy.errors import KafkaSystemError, SamzapyError
from samzapy.health import ContainerStatus
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.broker import resolve_bootstrap_servers
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import reader_consumer, true_end_offsets
from samzapy.kafka.settings import client_settings
from samzapy.metrics import MetricsRegistry
from samzapy.query.attach import RunningQueries, start_queries
from samzapy.reporters import Reporters, register_container_gauges
from samzapy.serdes import SerdeResolver
from samzapy.stores.changelog import KafkaChangelog
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 5.0
POLL_TIMEOUT_MS = 100
MAX_POLL_RECORDS = 5000


def _policy_fix(failure: MessageFailure) -> str:
    """How to let the job go on past messages like the one that stopped it."""
    cause = type(failure.__cause__).__name__ if failure.__cause__ is not None else "Exception"
    if "could not deserialise" in str(failure):
        return (
            "Fix the producer or the stream's serde, or go on past such messages: "
            "task.drop.deserialization.errors=true skips them, "
            "task.dead.letter.stream=kafka.<stream> keeps them aside"
        )
    return (
        f"Fix the task (run with -v for the traceback), or go on past such messages: "
        f"task.ignored.exceptions={cause} skips them, task.dead.letter.stream=kafka.<stream> keeps them aside"
    )


class Container:
    """Runs the tasks of one container of a job until it is stopped or, with
    ``exit_at_end``, until every input has been processed up to the end it had at start."""

    def __init__(
        self,
        job: JobConfig,
        *,
        container_id: int = 0,
        exit_at_end: bool = False,
        metrics_path: Path | None = None,
    ) -> None:
        if not 0 <= container_id < job.container_count:
            msg = (
                f"--container-id {container_id} is out of range: job.container.count is {job.container_count}"
            )
            raise SamzapyError(msg)
        self.job = job
        self.container_id = container_id
        self.exit_at_end = exit_at_end
        self.metrics_path = metrics_path
        self.registry = MetricsRegistry()
        self.metrics = self.registry.group("container")
        self.tasks: list[TaskInstance] = []
        self._last_checkpoints: dict[str, TaskCheckpoint] = {}
        self._stop_requested = False
        self._signals = 0
        self._commits = self.metrics.counter("commit-calls")
        self._commit_ns = self.metrics.counter("commit-ns")
        self._producer: Producer | None = None
        self._inputs: Inputs | None = None
        self._admin: TopicAdmin | None = None
        self._window_ns = self.metrics.counter("window-ns")
        self._async: AsyncRunner | None = None  # runs the AsyncStreamTask tasks, if any
        self._standby: StandbyReplicas | None = None  # warm copies of other containers' stores
        self._side_inputs: SideInputs | None = None  # stores filled from side-input topics
        self._queries: RunningQueries | None = None  # interactive queries (job.query.port)
        self._head_flusher: HeadFlusher | None = None  # stores.S.flush.at.head
        self._local_checkpoints = LocalCheckpointSchedule(
            {s.name: s.local_checkpoint_ms for s in job.stores.values()}, job.commit_ms
        )
        self.status = ContainerStatus()  # for /health
        self.reporters = Reporters.from_job(job, self.registry, self.status, container_id)

    # ----------------------------------------------------------------- lifecycle
    def run(self) -> int:
        """Run to the end; returns 0 (the exit code of a clean stop).

        Raises:
            MessageFailure: a message failed and the error policy is to stop; its text says
                what was committed and how to let the job go on past such messages.
            SamzapyError, or anything task code raised outside a message (``init``,
                ``window``): the container closed, nothing since the last commit committed.
        """
        stopping.reset()
        self._install_signal_handlers()
        try:
            self._start()
        except Exception as error:
            self.status.failed(str(error))
            self._close()
            raise
        try:
            self._loop()
            self._commit(final=True)
        except MessageFailure as failure:
            self.status.failed(str(failure))
            if failure.safe_to_commit:
                self._commit(final=True)
                outcome = "the job stopped after committing every message before it"
            else:
                outcome = (
                    "the failed call had already changed state or sent output, so nothing since the "
                    "last commit is committed; the next run resumes from that commit"
                )
            self._close()
            self._log_summary()
            stopped = MessageFailure(f"{failure}; {outcome}. {_policy_fix(failure)}", failure.safe_to_commit)
            raise stopped from failure
        except Exception as error:
            # Printed once by the command line's error boundary (traceback with -v / in the log).
            self.status.failed(f"{type(error).__name__}: {error}")
            self._close()
            raise
        self._close()
        self._log_summary()
        return 0

    def _install_signal_handlers(self) -> None:
        def handle(signum: int, _frame: Any) -> None:
            self._signals += 1
            if self._signals > 1:
                log.error("second %s: exiting at once, without a final commit", signal.Signals(signum).name)
                os._exit(1)
            log.warning(
                "%s received: finishing the current message, committing, stopping",
                signal.Signals(signum).name,
            )
            self._stop_requested = True
            stopping.request_stop(f"{signal.Signals(signum).name} received")

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, handle)

    # ----------------------------------------------------------------- start-up
    def _start(self) -> None:
        job = self.job
        consumer_servers = resolve_bootstrap_servers(job.consumer_bootstrap_servers)
        producer_servers = resolve_bootstrap_servers(job.producer_bootstrap_servers)
        self.reporters.start(producer_servers)
        self._admin = TopicAdmin(producer_servers)
        task_count, input_counts = self._input_partition_counts()
        mine = [p for p in range(task_count) if p % job.container_count == self.container_id]
        self.status.restoring(task_name_for(p) for p in mine)
        self._producer = Producer(producer_servers, job.producer_overrides)
        # before any restore, so that queries answer "restoring" from the start
        self._queries = start_queries(self, task_count, consumer_servers, self._admin, self._producer)
        self._admin.ensure_topic(
            job.checkpoint_topic, 1, compact=True, replication_factor=job.replication_factor
        )
        checkpoints = read_checkpoints(consumer_servers, job.checkpoint_topic)
        self._checkpoint_writer = CheckpointWriter(self._producer, job.checkpoint_topic)
        self._fence = Fence(consumer_servers, job.checkpoint_topic)
        self._fence.claim([task_name_for(p) for p in mine], checkpoints, self._checkpoint_writer)
        self._producer.flush()  # the takeover is visible before anything is restored or written
        for store in job.stores.values():
            if store.changelog is not None:
                self._admin.ensure_topic(
                    store.changelog.stream,
                    task_count,
                    compact=True,
                    replication_factor=job.replication_factor,
                    expect_partitions=task_count,
                )
                # Learn the topic's metadata now: else the first commit's changelog sends wait
                # for it (~0.4 s on the dev broker) while input waits too.
                self._producer.partitions_for(store.changelog.stream)
            elif not store.has_side_inputs:
                log.warning(
                    "store '%s' has no changelog: it is not logged and cannot be restored", store.name
                )
        serdes = SerdeResolver(job)
        outputs = OutputStreams(serdes, lambda stream: self._ensure_output(stream, task_count))
        policy = ErrorPolicy(job, self._producer)
        task_class = job.task_type  # imported once, when the configuration was parsed
        self._log_start(mine, input_counts, checkpoints)
        adopt_standby_checkpoints(job, mine)  # a failover restores from the standby's checkpoints
        if any(s.restore_engine == "spark" for s in job.stores.values()):
            from samzapy.spark.bulk_restore import restore_for_container  # needs the spark extra

            restore_for_container(job, mine, checkpoints)
        self._side_inputs = SideInputs.build(
            job, mine, consumer_servers, serdes, self.registry, self.container_id
        )
        self._side_inputs.catch_up()  # side-input stores are full before any init() or message
        for partition in mine:
            self.tasks.append(
                self._build_task(
                    partition,
                    task_class,
                    checkpoints,
                    serdes,
                    outputs,
                    policy,
                    consumer_servers,
                    input_counts,
                )
            )
        self._producer.flush()  # trim writes of restores are acknowledged before processing starts
        at_head = {s.name for s in job.stores.values() if s.flush_at_head}
        self._head_flusher = HeadFlusher.for_tasks(self.tasks, at_head)
        self._inputs = self._build_inputs(consumer_servers, input_counts, checkpoints)
        for task in self.tasks:
            task.offsets.update(
                {p.ssp: p.start_offset for p in self._inputs.partitions.values() if p.task is task}
            )
        self._async = AsyncRunner.for_tasks(self.tasks, job, policy)
        if self._async is not None:
            self._async.start()
        register_container_gauges(self.registry, self.tasks, self._inputs)
        self._standby = StandbyReplicas.start_for(
            job, self.container_id, task_count, consumer_servers, self.registry, self.status
        )
        self.status.running()

    def _input_partition_counts(self) -> tuple[int, dict[SystemStream, int]]:
        """The task count (the most partitions of any input) and each input's partition count.

        Intermediate inputs (``samza.intermediate``: the job writes them itself) are created
        when missing, with the task count of the other inputs, and must have exactly that many
        partitions: a key sent to partition p of it must come back to task p.
        """
        counts: dict[SystemStream, int] = {}
        intermediate = [s for s in self.job.inputs if self.job.stream(s).intermediate]
        for stream in self.job.inputs:
            count = self._admin.partition_count(stream.stream)
            if count is None and stream not in intermediate:
                msg = (
                    f"input stream '{stream}' does not exist on the broker; create it and feed it "
                    f"before starting the job, e.g. samzapy produce {stream.stream} --partitions N "
                    f"--file records.jsonl (see the records with: samzapy consume {stream.stream} "
                    f"--from-beginning)"
                )
                raise KafkaSystemError(msg)
            if count is not None:
                counts[stream] = count
        if intermediate:
            external = [n for s, n in counts.items() if s not in intermediate]
            task_count = max(external or counts.values() or [self.job.default_partitions or 1])
            for stream in intermediate:
                if stream not in counts:
                    counts[stream] = self._admin.ensure_topic(
                        stream.stream, task_count, replication_factor=self.job.replication_factor
                    )
                    log.info("created intermediate stream %s with %d partitions", stream, task_count)
                if counts[stream] != task_count:
                    msg = (
                        f"intermediate stream '{stream}' has {counts[stream]} partitions but the job "
                        f"has {task_count} tasks: a record it sends to partition p must come back to "
                        f"task p; recreate the topic with {task_count} partitions"
                    )
                    raise KafkaSystemError(msg)
        return max(counts.values()), counts

    def _ensure_output(self, stream: SystemStream, task_count: int) -> int:
        existing = self._admin.partition_count(stream.stream)
        if existing is not None:
            return existing
        configured = self.job.stream(stream).partitions or self.job.default_partitions or task_count
        return self._admin.ensure_topic(
            stream.stream, configured, replication_factor=self.job.replication_factor
        )

    def _build_task(
        self,
        partition: int,
        task_class: type,
        checkpoints: dict[str, TaskCheckpoint],
        serdes: SerdeResolver,
        outputs: OutputStreams,
        policy: ErrorPolicy,
        consumer_servers: str,
        input_counts: dict[SystemStream, int],
    ) -> TaskInstance:
        name = task_name_for(partition)
        checkpoint = checkpoints.get(name)
        stores: dict[str, Any] = {}
        for store_config in self.job.stores.values():
            if store_config.has_side_inputs:  # filled and kept up to date by SideInputs
                stores[store_config.name] = self._side_inputs.store(store_config.name, partition)
                continue
            changelog = None
            if store_config.changelog is not None:
                changelog = KafkaChangelog(
                    store_config.changelog.stream, partition, self._producer, consumer_servers
                )
            key_serde, msg_serde = serdes.for_store(store_config)
            store = build_store(
                store_config,
                partition=partition,
                base_dir=self.job.logged_store_base_dir,
                key_serde=key_serde,
                msg_serde=msg_serde,
                changelog=changelog,
                metrics=self.registry.group(f"store.{store_config.name}.{name}"),
            )
            offset = checkpoint.changelog_offsets.get(store_config.name) if checkpoint else None
            store.restore(offset)
            stores[store_config.name] = store
        task_metrics = self.registry.group(f"task.{name}")
        instance = TaskInstance(
            name,
            partition,
            task_class(),
            stores,
            TaskCollector(name, self._producer, outputs),
            {
                SystemStreamPartition(s.system, s.stream, partition): serdes.for_stream(s)
                for s, count in input_counts.items()
                if partition < count
            },
            policy,
            task_metrics,
        )
        instance.init(StoreContext(name, partition, self.job, stores, task_metrics))
        return instance

    def _build_inputs(
        self,
        servers: str,
        input_counts: dict[SystemStream, int],
        checkpoints: dict[str, TaskCheckpoint],
    ) -> Inputs:
        consumer = reader_consumer(servers, **client_settings(self.job.consumer_overrides))
        parts: list[InputPartition] = []
        tps = [
            (
                task,
                SystemStreamPartition(s.system, s.stream, task.partition),
                TopicPartition(s.stream, task.partition),
            )
            for task in self.tasks
            for s, count in input_counts.items()
            if task.partition < count
        ]
        # The true end, not the reported one (which the dev broker undercounts, see
        # samzapy.kafka.reading): "upcoming" starts there, --exit-at-end stops there.
        ends = true_end_offsets(consumer, [tp for _, _, tp in tps])
        begins = consumer.beginning_offsets([tp for _, _, tp in tps]) if tps else {}
        for task, ssp, tp in tps:
            stream_config = self.job.stream(ssp.system_stream)
            checkpoint = checkpoints.get(task.task_name)
            if checkpoint is not None and ssp in checkpoint.input_offsets:
                start = checkpoint.input_offsets[ssp]
            elif stream_config.offset_default == "oldest":
                start = begins[tp]
            else:
                start = ends[tp]
            parts.append(
                InputPartition(
                    ssp, tp, task, stream_config.priority, stream_config.bootstrap, start, ends[tp]
                )
            )
            log.info("%s: %s starts at offset %d (end at start: %d)", task.task_name, ssp, start, ends[tp])
        return Inputs(consumer, parts)

    # ----------------------------------------------------------------- the loop
    def _loop(self) -> None:
        inputs = self._inputs
        assert inputs is not None
        window_s = self.job.window_ms / 1000 if self.job.window_ms else None
        commit_s = self.job.commit_ms / 1000
        last_commit = last_progress = time.monotonic()
        processed_at_progress = 0
        runner = self._async
        while not self._stop_requested:
            self._side_inputs.pump()  # table updates that arrived are applied before the next poll
            timeout_ms, max_records = POLL_TIMEOUT_MS, MAX_POLL_RECORDS
            if runner is not None:  # async tasks: bounded polls, no blocking while work is held
                max_records = runner.poll_budget(MAX_POLL_RECORDS)
                timeout_ms = 0 if runner.busy else POLL_TIMEOUT_MS
            polled = [] if runner is not None and runner.full else inputs.poll(timeout_ms, max_records)
            for part, records in polled:
                task = part.task
                if runner is not None and runner.owns(task):
                    runner.submit(part.ssp, task, records)
                    continue
                done = 0
                while done < len(records) and not task.coordinator.shutdown_requested:
                    done = task.process_records(part.ssp, records, done)
                    if task.coordinator.commit_requested:
                        self._commit()
                if self._stop_requested or task.coordinator.shutdown_requested:
                    break
            if self._head_flusher is not None and polled:
                self._head_flusher.after_poll(sum(len(records) for _, records in polled), max_records)
            if runner is not None:
                runner.pump()
            now = time.monotonic()
            if window_s is not None:
                if runner is not None and any(now - t.last_window >= window_s for t in self.tasks):
                    runner.drain()  # a window call sees no message half-processed
                for task in self.tasks:
                    if now - task.last_window >= window_s:
                        started = time.perf_counter_ns()
                        task.window()
                        self._window_ns.inc(time.perf_counter_ns() - started)
            if now - last_commit >= commit_s or any(t.coordinator.commit_requested for t in self.tasks):
                self._commit()
                last_commit = time.monotonic()
            if any(t.coordinator.shutdown_requested for t in self.tasks):
                log.info("a task asked to shut down")
                break
            positions = self._positions()
            inputs.note_progress(positions)
            if self.exit_at_end and inputs.all_caught_up():
                log.info("every input reached the end offset it had at start: stopping (--exit-at-end)")
                break
            if now - last_progress >= PROGRESS_EVERY_S:
                total = self._processed()
                rate = (total - processed_at_progress) / (now - last_progress)
                log.info("processed %d messages (%.0f msg/s); lag %s", total, rate, inputs.lag(positions))
                processed_at_progress, last_progress = total, now
                self._write_metrics()

    def _positions(self) -> dict[SystemStreamPartition, int]:
        positions: dict[SystemStreamPartition, int] = {}
        for task in self.tasks:
            positions.update(task.offsets)
        return positions

    def _processed(self) -> int:
        return sum(t.metrics.counter("messages-actually-processed").value for t in self.tasks)

    # ----------------------------------------------------------------- commit
    def _commit(self, *, final: bool = False) -> None:
        """The commit protocol of the module docstring; ``final`` (at shutdown) always takes
        the local store checkpoints, a routine commit those its schedule says are due."""
        started = time.perf_counter_ns()
        if self._async is not None:
            self._async.drain()  # every message taken in is done: stores match the offsets
        self._drop_fenced()
        for task in self.tasks:
            task.flush_stores()
        self._producer.flush()
        crash_point("after-producer-flush")
        store_offsets = self._local_checkpoints.take(self.tasks, final=final)
        crash_point("after-local-checkpoint")
        for task in self.tasks:
            task.coordinator.commit_requested = False
            checkpoint = TaskCheckpoint(
                task.task_name,
                dict(task.offsets),
                store_offsets[task.task_name],
                self._fence.generations[task.task_name],
            )
            # An idle task's checkpoint would be the one already written: skip the write, so an
            # idle container sends nothing (and a paused zombie has nothing in flight).
            if self._last_checkpoints.get(task.task_name) != checkpoint:
                self._checkpoint_writer.write(checkpoint)
                self._last_checkpoints[task.task_name] = checkpoint
        self._producer.flush()
        self._commits.inc()
        self._commit_ns.inc(time.perf_counter_ns() - started)
        self._write_metrics()

    def _drop_fenced(self) -> None:
        """Drop the tasks another container took over (see samzapy.container.fencing): their
        stores are neither flushed nor closed, no checkpoint is written for them."""
        lost = self._fence.lost()
        if not lost:
            return
        for task in [t for t in self.tasks if t.task_name in lost]:
            log.error(
                "%s: fenced: another container owns it now (generation %d); dropping it without "
                "writing its stores or a checkpoint",
                task.task_name,
                lost[task.task_name],
            )
            task.coordinator.shutdown_requested = True  # stops a batch being processed
            self.tasks.remove(task)
            if self._async is not None:
                self._async.runners.pop(id(task), None)
        self._inputs.drop_tasks(self.tasks, self._positions())
        if self._head_flusher is not None:
            self._head_flusher.drop(self.tasks)
        if not self.tasks:
            log.error("every task of this container is owned by another container now: stopping")
            self._stop_requested = True

    # ----------------------------------------------------------------- shutdown
    def _close(self) -> None:
        if self._queries is not None:
            self._queries.stop()  # before the stores close: no query reads them after this
        if self._standby is not None:
            self._standby.stop()
        if self._async is not None:
            self._async.close()
        for task in self.tasks:
            try:
                task.close()
            except Exception:
                log.exception("closing %s failed", task.task_name)
        if self._side_inputs is not None:
            self._side_inputs.close()
        if self._inputs is not None:
            self._inputs.consumer.close()
        if self._producer is not None:
            try:
                self._producer.close()
            except Exception:
                log.exception("closing the producer failed")
        if self._admin is not None:
            self._admin.close()
        if getattr(self, "_fence", None) is not None:
            self._fence.close()
        self._write_metrics()
        self.status.stopped()
        self.reporters.stop()

    def _write_metrics(self) -> None:
        if self.metrics_path is None:
            return
        tmp = self.metrics_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.registry.snapshot(), indent=1, sort_keys=True, default=str))
        tmp.replace(self.metrics_path)

    # ----------------------------------------------------------------- logs
    def _log_start(
        self, mine: list[int], counts: dict[SystemStream, int], checkpoints: dict[str, Any]
    ) -> None:
        job = self.job
        log.info(
            "job %s (id %s), container %d of %d: tasks %s; inputs %s; stores %s; %d task checkpoints found",
            job.job_name,
            job.job_id,
            self.container_id,
            job.container_count,
            ", ".join(task_name_for(p) for p in mine) or "none",
            ", ".join(f"{s} ({n} partitions)" for s, n in counts.items()),
            ", ".join(
                f"{s.name} ({s.engine}{', changelog ' + str(s.changelog) if s.changelog else ''})"
                for s in job.stores.values()
            )
            or "none",
            len(checkpoints),
        )

    def _log_summary(self) -> None:
        skipped = sum(t.metrics.counter("skipped-messages").value for t in self.tasks)
        dead = sum(t.metrics.counter("dead-lettered").value for t in self.tasks)
        log.info(
            "stopped: %d messages processed, %d commits, %d skipped, %d dead-lettered",
            self._processed(),
            self._commits.value,
            skipped,
            dead,
        )

"""Standby replicas (``job.standbytasks.replication.factor``, as in Samza and Kafka Streams).

A container keeps warm copies of other containers' task stores, so that a failover replays only
a short changelog tail instead of the whole changelog.

Assignment (:func:`samzapy.container.assignment.standby_tasks_of`): with ``N`` containers and
replication factor ``R``, container ``I`` stands by for the tasks of containers
``I-1, ..., I-(R-1)`` (mod ``N``); none when ``N == 1`` or ``R == 1``. ``R <= N`` is checked
with the configuration, so no container stands by for its own tasks and every task has
``R - 1`` standbys on distinct containers.

How a copy stays warm (:class:`StandbyReplicas`, one background thread per container):

1. tail the job's checkpoint topic: each task's checkpoint (the newest of the highest ownership
   generation, :class:`samzapy.checkpoint.CheckpointFold`) gives ``K``, the changelog offset
   of each store's committed state;
2. apply that store's changelog records up to ``K`` (never beyond: records after ``K`` may
   still be undone by the owner's next restore) to a RocksDB database of its own, straight
   into the engine, as a restore does;
3. at most every ``task.commit.ms``, and once more when the replicas stop, take a local
   checkpoint at ``K`` (:mod:`samzapy.container.standby_store` has the layout).

A container that takes a task over first moves the standby checkpoints of that task next to
its store (:func:`adopt_standby_checkpoints`); the restore then starts from the newest one at
or below the task's ``K`` and replays only what the owner committed after it.

A standby never writes to Kafka: its changelog readers have a producer that raises on send,
and it has no checkpoint writer. A failing standby logs the error and stops standing by; the
container's own tasks go on (a failover then restores from the changelog as without standbys).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from samzapy.checkpoint import ChangelogFence, CheckpointFold, task_of_key
from samzapy.config import JobConfig
from samzapy.config.model import StoreConfig
from samzapy.container.assignment import standby_tasks_of
from samzapy.container.standby_store import StandbyStore, standby_dir
from samzapy.errors import CheckpointError
from samzapy.health import ContainerStatus
from samzapy.kafka.consumer import Consumer
from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.records import TopicPartition
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.factory import store_dir
from samzapy.stores.snapshots import JobSnapshots
from samzapy.streams import task_name_for

log = logging.getLogger(__name__)

#: Seconds between two progress lines of the standby thread.
PROGRESS_EVERY_S = 5.0
#: How long :meth:`StandbyReplicas.stop` waits for the thread.
STOP_TIMEOUT_S = 30.0


def _standby_configs(job: JobConfig) -> list[StoreConfig]:
    """The stores that can have standbys.

    Logged RocksDB stores (an in-memory store lives only in its owner's process; an unlogged one
    has nothing to tail).
    """
    return [s for s in job.stores.values() if s.changelog is not None and s.engine == "rocksdb"]


def adopt_standby_checkpoints(job: JobConfig, partitions: list[int]) -> int:
    """Move the standby checkpoints of the stores of ``partitions`` next to the stores.

    ``partitions`` are tasks this container is about to own; the restore looks for checkpoints
    next to the stores. Returns the number moved.

    Call before restoring. A checkpoint at an offset the store has already is left where it is;
    one that vanishes meanwhile (a standby of another container on the same base dir pruned it)
    is skipped.
    """
    moved = 0
    for config in _standby_configs(job):
        assert config.changelog is not None  # _standby_configs keeps logged stores alone
        topic = config.changelog.stream
        for partition in partitions:
            theirs = LocalCheckpoints(
                standby_dir(job.logged_store_base_dir, config.name, partition), topic, partition
            )
            ours = LocalCheckpoints(
                store_dir(job.logged_store_base_dir, config.name, partition), topic, partition
            )
            have = {c.offset for c in ours.newest_first()}
            for checkpoint in theirs.newest_first():
                if checkpoint.offset in have:
                    continue
                ours.root.mkdir(parents=True, exist_ok=True)
                try:
                    os.rename(checkpoint.path, ours.root / str(checkpoint.offset))
                except OSError as exc:
                    log.warning("standby checkpoint %s could not be adopted: %s", checkpoint.path, exc)
                    continue
                moved += 1
                log.info(
                    "%s: store %s: adopted the standby checkpoint at changelog offset %d",
                    task_name_for(partition),
                    config.name,
                    checkpoint.offset,
                )
    return moved


class StandbyReplicas:
    """The standby copies of one container, kept warm by one background thread.

    The thread owns every database handle and consumer it uses (none is shared with the
    container's tasks); the container only starts it, reads its metrics and stops it.

    Args:
        job: the job's configuration.
        partitions: the tasks to stand by for (:func:`~samzapy.container.assignment.standby_tasks_of`).
        servers: bootstrap servers to read the checkpoint topic and the changelogs from.
        registry: where the ``standby.<store>.<task>`` metric groups go.
    """

    def __init__(
        self,
        job: JobConfig,
        partitions: list[int],
        servers: str,
        registry: MetricsRegistry,
        status: ContainerStatus | None = None,
    ) -> None:
        self.job = job
        self._status = status
        self.partitions = partitions
        # stores restored from snapshots start a cold copy from one (stores/snapshots.py)
        snapshots = JobSnapshots.for_job(job, MetricsGroup("standby-snapshots"), upload=False)
        self.stores = [
            StandbyStore(
                config,
                partition,
                job.logged_store_base_dir,
                servers,
                registry.group(f"standby.{config.name}.{task_name_for(partition)}"),
                None if snapshots is None else snapshots.source(config, partition, None),
            )
            for partition in partitions
            for config in _standby_configs(job)
        ]
        self._servers = servers
        self._tp = TopicPartition(job.checkpoint_topic, 0)
        self._position = 0
        self._fold = CheckpointFold()  # its checkpoints: the committed state of each task
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="standby-replicas", daemon=True)
        self.failed = False

    @classmethod
    def start_for(
        cls,
        job: JobConfig,
        container_id: int,
        task_count: int,
        servers: str,
        registry: MetricsRegistry,
        status: ContainerStatus | None = None,
    ) -> StandbyReplicas | None:
        """Start the standbys of container ``container_id``; ``None`` when it has none.

        ``status`` (for ``/health``) learns whether they run or failed.
        """
        partitions = standby_tasks_of(
            container_id, job.container_count, task_count, job.standby_replication_factor
        )
        if not partitions:
            return None
        names = ", ".join(task_name_for(p) for p in partitions)
        configs = _standby_configs(job)
        if not configs:
            log.info("standby tasks %s: no logged RocksDB store to keep a copy of", names)
            return None
        log.info(
            "standby replicas (job.standbytasks.replication.factor=%d): container %d keeps warm copies "
            "of stores %s of tasks %s in %s/<store>/Partition_<N>.standby",
            job.standby_replication_factor,
            container_id,
            ", ".join(c.name for c in configs),
            names,
            job.logged_store_base_dir,
        )
        return cls.start(job, partitions, servers, registry, status)

    @classmethod
    def start(
        cls,
        job: JobConfig,
        partitions: list[int],
        servers: str,
        registry: MetricsRegistry,
        status: ContainerStatus | None = None,
    ) -> StandbyReplicas:
        """Start keeping warm copies of the stores of ``partitions``.

        Group mode: the assignment names them.
        """
        replicas = cls(job, partitions, servers, registry, status)
        replicas._report("running")
        replicas._thread.start()
        return replicas

    # ----------------------------------------------------------------- the thread
    def _run(self) -> None:
        consumer = None
        commit_s = self.job.commit_ms / 1000
        next_progress = time.monotonic() + PROGRESS_EVERY_S
        try:
            consumer = reader_consumer(self._servers)
            while not self._stop.is_set():
                self._tail_checkpoints(consumer)
                for store in self.stores:
                    if self._stop.is_set():
                        break
                    store.catch_up(self._committed_offset(store), self._stop, self._fence(store))
                    store.maybe_checkpoint(time.monotonic(), commit_s)
                if time.monotonic() >= next_progress:
                    next_progress = time.monotonic() + PROGRESS_EVERY_S
                    self._log_progress()
            for store in self.stores:  # a task taken over next adopts the copy as it is now
                store.maybe_checkpoint(time.monotonic(), 0.0)
        except Exception as exc:
            self.failed = True
            self._report("failed", f"{type(exc).__name__}: {exc}")
            log.exception(
                "standby replicas failed and stop; this container's tasks go on, and a failover of "
                "the tasks it stood by for restores from the changelog"
            )
        finally:
            if consumer is not None:
                consumer.close()
            for store in self.stores:
                try:
                    store.close()
                except Exception:
                    log.exception("closing the %s failed", store)

    def copy_lags(self) -> dict[int, int | None]:
        """Per task kept here, the changelog records its copy is behind the owner's committed state.

        The sum over the task's stores of the committed offset minus the newest local checkpoint
        (what a move of the task here would replay, and what the group's leader compares: see
        :func:`samzapy.container.held_state.held_state`). ``None`` while not known (a store has
        not read the owner's checkpoint yet) or never (the copy was given up, the thread failed).
        Read from another thread (the group membership's): plain reads of ints.
        """
        lags: dict[int, int | None] = dict.fromkeys(self.partitions, 0)
        for store in self.stores:
            lag = lags.get(store.partition)
            if lag is None:
                continue
            if self.failed or store.disabled or store.committed is None:
                lags[store.partition] = None
            else:
                lags[store.partition] = lag + store.committed - store.checkpointed
        return lags

    def _report(self, state: str, error: str | None = None) -> None:
        if self._status is not None:
            self._status.standby((task_name_for(p) for p in self.partitions), state, error)

    def _tail_checkpoints(self, consumer: Consumer) -> None:
        """Read the checkpoint topic from where the last call stopped to its end."""
        watched = {task_name_for(p) for p in self.partitions}
        for batch in read_partition(consumer, self._tp, self._position):
            for record in batch:
                self._position = record.offset + 1
                if record.key is None or task_of_key(record.key) not in watched:
                    continue
                try:
                    self._fold.add_record(record, self._tp.topic)  # a fenced zombie's is ignored
                except CheckpointError as exc:
                    log.warning("standby replicas: %s: skipped", exc)

    def _fence(self, store: StandbyStore) -> ChangelogFence | None:
        """The owner checkpoint's changelog fence of ``store`` (a zombie's records skipped)."""
        checkpoint = self._fold.checkpoints.get(store.task_name)
        return None if checkpoint is None else checkpoint.fence_for(store.name)

    def _committed_offset(self, store: StandbyStore) -> int | None:
        checkpoint = self._fold.checkpoints.get(store.task_name)
        return None if checkpoint is None else checkpoint.changelog_offsets.get(store.name)

    def _log_progress(self) -> None:
        log.info(
            "standby replicas: %s",
            "; ".join(
                f"{s.task_name}/{s.name}: committed {s.committed}, applied {s.applied}, "
                f"checkpoint {s.checkpointed}, lag {s.lag}"
                for s in self.stores
            ),
        )

    # ----------------------------------------------------------------- shutdown
    def stop(self) -> None:
        """Stop the thread.

        It takes a last local checkpoint of every copy that is at its committed offset (a
        container taking one of these tasks over adopts it), then closes its databases and
        consumers. Nothing is written to Kafka.
        """
        self._stop.set()
        self._thread.join(timeout=STOP_TIMEOUT_S)
        if self._thread.is_alive():
            log.warning("the standby thread did not stop within %.0fs; leaving it", STOP_TIMEOUT_S)

"""Re-shard a stopped job's state to a new partition count (``state-storage-tool reshard``).

For a job stopped at the end of its input whose input topics now have M partitions (more or
fewer than its N tasks), every entry of every logged store moves to the task that will
receive its key under M: the task ``partition_for_key(partition_key, M)`` of the job's own
partitioner, where the partition key comes from the store's layout
(:mod:`samzapy.operators.state_layout`: the key itself for stores keyed by the input key, the
user key inside a window, or the hook ``stores.<store>.partition.key``). An entry that
belongs to no key (a task's own watermark, registry of ids, counter) goes to the new tasks
that may receive the old task's keys, combined there by the rule its layout names
(:mod:`samzapy.spark.state_data.reshard_own`).

Steps, in order:

1. check that no store's layout refuses a reshard (e.g. the foreign-key join's versions are
   input offsets), read every store's committed state (each task's changelog up to its
   checkpointed offset) and route each entry to its new task; an entry with neither a
   partition key nor a merge rule stops the reshard before anything changes;
2. stage the routed entries as Parquet under the base directory (the only copy of the state
   between steps 3 and 4: on a failure there, the message names it);
3. delete each changelog topic and create it again with M partitions (Kafka cannot remove
   partitions, and the dev broker cannot add them);
4. combine the tasks' own entries, and write all entries: changelog partitions, SST files
   ingested into ``<base>/<store>/Partition_<0..M-1>`` with local checkpoints
   (:mod:`samzapy.spark.state_data.write`); the store partitions ``M..N-1`` are deleted from disk:
   no task will see their keys again;
5. write checkpoints for tasks ``0..M-1`` (the new changelog offsets; an input offset is
   kept only where the input partition still holds at least that many records, so a topic
   that was recreated is read from its start by ``samza.offset.default``) and delete those
   of tasks ``M..N-1``.

Change the input topics first (step 5 looks at them), then reshard, then start the job.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from samzapy.config import Config, JobConfig
from samzapy.config.model import StoreConfig
from samzapy.spark import SparkJobError
from samzapy.spark.state_data.reshard_own import ROUTED_SCHEMA, merged_entries
from samzapy.spark.state_data.write import WriteStats, rewrite_partitions

log = logging.getLogger(__name__)


@dataclass
class ReshardStats:
    """What a reshard did."""

    old_tasks: int
    new_tasks: int
    write: WriteStats
    read_s: float
    seconds: float
    records: int = 0  # changelog records read

    @property
    def rate(self) -> float:
        """Changelog records read per second of the whole reshard."""
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def keys(self) -> int:
        """Keys moved (all of them)."""
        return self.write.keys


def reshard(
    config: str | Path | Config,
    partitions: int,
    *,
    spark: Any = None,
    base_dir: str | Path | None = None,
    master: str | None = None,
    progress: TextIO | None = None,
) -> ReshardStats:
    """Re-shard every logged store of the stopped job to ``partitions`` tasks (module doc).

    The read's progress (records, MB, rate, ETA) goes to ``progress`` (default: the log).

    Raises:
        SparkJobError: a store cannot be resharded (not RocksDB, its layout refuses, an entry
            with neither a partition key nor a merge rule), or a step failed (the message says
            what state things are in).
    """
    from samzapy.kafka.broker import resolve_bootstrap_servers
    from samzapy.operators.state_layout import layout_for
    from samzapy.spark.session import get_spark
    from samzapy.spark.state_data.progress import SparkProgress
    from samzapy.spark.state_data.read import changelog_sources, job_of, planned, raw_frame

    started = time.perf_counter()
    if partitions < 1:
        msg = f"--partitions {partitions}: a job needs at least 1 task"
        raise SparkJobError(msg)
    raw_config, job = job_of(config)
    stores = _logged_stores(job)
    layouts = {s.name: layout_for(raw_config, job, s) for s in stores}
    _check_layouts(layouts)
    spark = spark or get_spark(master, "samzapy-reshard")[0]
    servers = resolve_bootstrap_servers(job.producer_bootstrap_servers)
    old_tasks = _old_task_count(servers, stores)
    sources = [src for s in stores for src in changelog_sources(job, s, None, to_checkpoint=True)]
    base = Path(base_dir) if base_dir else job.logged_store_base_dir
    staging = base / f".reshard-staging-{uuid.uuid4().hex[:12]}"
    try:
        with SparkProgress(spark, "reshard read", planned(job, sources), progress) as shown:
            routed = raw_frame(spark, job, layouts, sources, shown.counters)
            routed.mapInArrow(_Router(layouts, partitions), ROUTED_SCHEMA).write.parquet(
                str(staging)
            )  # step 2
    except Exception as exc:
        from samzapy.spark.session import executor_error

        shutil.rmtree(staging, ignore_errors=True)
        msg = f"reshard: nothing changed; reading the state failed: {executor_error(exc)}"
        raise SparkJobError(msg) from exc
    read_s = time.perf_counter() - started
    try:
        _recreate_changelogs(servers, stores, partitions)  # step 3
        staged = spark.read.parquet(str(staging))
        keyed = staged.filter(staged["rule"].isNull()).select("store", "partition", "key", "value")
        entries = keyed.unionByName(merged_entries(staged, old_tasks, partitions))
        write = rewrite_partitions(spark, entries, job, stores, partitions, base, checkpoints=False)
    except Exception as exc:
        msg = (
            f"reshard failed after the changelogs were recreated: {exc}. The state is staged in "
            f"{staging} (Parquet, columns store/partition/key/value/rule/old: the keys' entries with "
            f"their new partitions, the tasks' own entries with their old task and merge rule, "
            f"{old_tasks} old tasks): write it with samzapy.spark.state_data.reshard_own.merged_entries and "
            "samzapy.spark.state_data.write.rewrite_partitions"
        )
        raise SparkJobError(msg) from exc
    _drop_old_partitions(base, stores, partitions, old_tasks)
    _write_checkpoints(job, servers, write, partitions, old_tasks)
    shutil.rmtree(staging, ignore_errors=True)
    stats = ReshardStats(old_tasks, partitions, write, read_s, time.perf_counter() - started, shown.records)
    log.info(
        "reshard %d -> %d tasks: %d keys of %d stores in %.1fs (read %.1fs)",
        old_tasks,
        partitions,
        stats.keys,
        len(stores),
        stats.seconds,
        read_s,
    )
    return stats


def _logged_stores(job: JobConfig) -> list[StoreConfig]:
    from samzapy.spark.sst import check_ingestible

    stores = [s for s in job.stores.values() if s.changelog is not None]
    if not stores:
        msg = "the job has no logged store (stores.<name>.changelog): nothing to reshard"
        raise SparkJobError(msg)
    for store in stores:
        check_ingestible(store, ttl_ok=True)
    for store in job.stores.values():
        if store.changelog is None and not store.has_side_inputs:
            log.warning("store '%s' has no changelog: its local state is not moved", store.name)
    return stores


def _check_layouts(layouts: dict[str, Any]) -> None:
    """Stop when a store's layout says the job's state must not be resharded."""
    for name, layout in layouts.items():
        # only some layouts have a refusal (ForeignKeySubscriptionLayout, SharedLayout)
        refusal = getattr(layout, "reshard_refusal", None)
        if refusal:
            msg = f"store '{name}' cannot be resharded: {refusal}. Nothing was changed"
            raise SparkJobError(msg)


def _old_task_count(servers: str, stores: list[StoreConfig]) -> int:
    from samzapy.kafka.admin import TopicAdmin

    with TopicAdmin(servers) as admin:
        counts = {s.name: admin.partition_count(s.changelog.stream) for s in stores if s.changelog}
    if None in counts.values() or len(set(counts.values())) != 1:
        msg = f"the changelogs must all exist with one partition per task; found partition counts {counts}"
        raise SparkJobError(msg)
    return next(iter(counts.values()))  # type: ignore[return-value]


class _Router:
    """Executor side of step 1: raw state rows -> ROUTED_SCHEMA rows.

    A key's entry goes with its new task; a task's own entry with its old task and merge rule.
    """

    def __init__(self, layouts: dict[str, Any], partitions: int) -> None:
        self.layouts, self.partitions = layouts, partitions

    def __call__(self, batches: Any) -> Any:
        import pyarrow as pa

        from samzapy.kafka.partitioner import partition_for_key

        for batch in batches:
            names = ("store", "partition", "key_bytes", "value_bytes")
            stores, olds, keys, values = (batch.column(n).to_pylist() for n in names)
            routed: list[int] = []
            rules: list[str | None] = []
            for store, key, value in zip(stores, keys, values, strict=True):
                layout = self.layouts[store]
                partition_key = layout.partition_key(key, value)
                if partition_key is None:
                    routed.append(-1)  # combined into the new tasks when written (reshard_own)
                    rules.append(self._rule(store, layout, key, value))
                else:
                    routed.append(partition_for_key(partition_key, self.partitions))
                    rules.append(None)
            columns = {"store": stores, "partition": routed, "key": keys, "value": values}
            columns |= {"rule": rules, "old": olds}
            yield pa.RecordBatch.from_pydict(columns, schema=_routed_arrow_schema())

    @staticmethod
    def _rule(store: str, layout: Any, key: bytes, value: bytes) -> str:
        from samzapy.store_codec import escaped_text

        rule: str | None = layout.merge_rule(key, value)
        if rule is None:
            msg = (
                f"store '{store}' holds the entry {escaped_text(key)} that belongs to no key (a task's "
                f"own state) and that its layout ({type(layout).__name__}) does not say how to combine "
                "across tasks: it cannot be moved. Declare it in the task's state_layouts "
                f"(samzapy.operators.state_layout.TaskEntries), or name a function that gives its partition "
                f"key with stores.{store}.partition.key"
            )
            raise SparkJobError(msg)
        return rule


def _routed_arrow_schema() -> Any:
    import pyarrow as pa

    fields = [("store", pa.string()), ("partition", pa.int32()), ("key", pa.binary())]
    fields += [("value", pa.binary()), ("rule", pa.string()), ("old", pa.int32())]
    return pa.schema(fields)


def _recreate_changelogs(servers: str, stores: list[StoreConfig], partitions: int) -> None:
    from samzapy.kafka.admin import TopicAdmin

    with TopicAdmin(servers) as admin:
        for store in stores:
            assert store.changelog is not None
            topic = store.changelog.stream
            admin.delete_topic(topic)
            deadline = time.monotonic() + 30
            while admin.partition_count(topic) is not None:  # deletion is asynchronous on Kafka
                if time.monotonic() > deadline:
                    msg = f"changelog topic '{topic}' was deleted but still exists after 30s"
                    raise SparkJobError(msg)
                time.sleep(0.2)
            admin.ensure_topic(topic, partitions, compact=True, expect_partitions=partitions)
            log.info("changelog %s recreated with %d partitions", topic, partitions)


def _drop_old_partitions(base: Path, stores: list[StoreConfig], partitions: int, old_tasks: int) -> None:
    from samzapy.stores.checkpoints import LocalCheckpoints
    from samzapy.stores.factory import store_dir

    for store in stores:
        for partition in range(partitions, old_tasks):
            live = store_dir(base, store.name, partition)
            LocalCheckpoints(live, store.changelog.stream if store.changelog else "", partition).delete_all()
            shutil.rmtree(live, ignore_errors=True)


def _write_checkpoints(
    job: JobConfig, servers: str, write: WriteStats, partitions: int, old_tasks: int
) -> None:
    from samzapy.checkpoint import CheckpointWriter, TaskCheckpoint, read_checkpoint_fold
    from samzapy.kafka.producer import Producer

    fold = read_checkpoint_fold(servers, job.checkpoint_topic)
    current = fold.checkpoints
    generation = max((c.generation for c in current.values()), default=0)
    ends = _input_ends(servers, job, partitions)
    producer = Producer(servers)
    try:
        writer = CheckpointWriter(producer, job.checkpoint_topic)
        for partition in range(partitions):
            name = f"Partition {partition}"
            old = current.get(name) or TaskCheckpoint(name)
            inputs = {ssp: o for ssp, o in old.input_offsets.items() if ends.get(ssp, -1) >= o}
            changelogs = {p.store: p.offset for p in write.partitions if p.partition == partition}
            writer.write(TaskCheckpoint(name, inputs, changelogs, generation))
        for partition in range(partitions, old_tasks):
            for key in fold.record_keys(f"Partition {partition}"):  # a record per generation
                writer.tombstone(key)
        producer.flush()
    finally:
        producer.close()


def _input_ends(servers: str, job: JobConfig, partitions: int) -> dict[Any, int]:
    """The true end offset of every input partition the new tasks read."""
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.reading import reader_consumer
    from samzapy.records import TopicPartition
    from samzapy.spark.kafka_source import true_end_offset
    from samzapy.streams import SystemStreamPartition

    ends: dict[Any, int] = {}
    consumer = reader_consumer(servers)
    try:
        with TopicAdmin(servers) as admin:
            for stream in job.inputs:
                count = admin.partition_count(stream.stream) or 0
                for partition in range(min(count, partitions)):
                    end = true_end_offset(consumer, TopicPartition(stream.stream, partition))
                    ends[SystemStreamPartition(stream.system, stream.stream, partition)] = end
    finally:
        consumer.close()
    return ends

"""The container's start-up steps that talk to the broker.

Input partition counts, changelog topics, and where each input partition starts
(``run_loop.Container._start`` runs them).
"""

from __future__ import annotations

import logging

from samzapy.checkpoint import TaskCheckpoint
from samzapy.config import JobConfig
from samzapy.container.inputs import InputPartition, Inputs
from samzapy.container.task_instance import TaskInstance
from samzapy.errors import KafkaSystemError
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.consumer import Consumer
from samzapy.kafka.offsets import beginning_offsets
from samzapy.kafka.producer import Producer
from samzapy.kafka.reading import reader_consumer, true_end_offsets
from samzapy.kafka.settings import client_settings
from samzapy.records import TopicPartition
from samzapy.streams import SystemStream, SystemStreamPartition, task_name_for

log = logging.getLogger(__name__)


def input_partition_counts(admin: TopicAdmin, job: JobConfig) -> tuple[int, dict[SystemStream, int]]:
    """The task count (the most partitions of any input) and each input's partition count.

    Intermediate inputs (``samza.intermediate``: the job writes them itself) are created
    when missing, with the task count of the other inputs, and must have exactly that many
    partitions: a key sent to partition p of it must come back to task p.

    Raises:
        KafkaSystemError: an input topic is missing, or an intermediate one has the wrong
            partition count.
    """
    counts: dict[SystemStream, int] = {}
    intermediate = [s for s in job.inputs if job.stream(s).intermediate]
    for stream in job.inputs:
        count = admin.partition_count(stream.stream)
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
        task_count = max(external or counts.values() or [job.default_partitions or 1])
        for stream in intermediate:
            _ensure_intermediate(admin, job, stream, task_count, counts)
    return max(counts.values()), counts


def _ensure_intermediate(
    admin: TopicAdmin, job: JobConfig, stream: SystemStream, task_count: int, counts: dict[SystemStream, int]
) -> None:
    if stream not in counts:
        counts[stream] = admin.ensure_topic(
            stream.stream, task_count, replication_factor=job.replication_factor
        )
        log.info("created intermediate stream %s with %d partitions", stream, task_count)
    if counts[stream] != task_count:
        msg = (
            f"intermediate stream '{stream}' has {counts[stream]} partitions but the job "
            f"has {task_count} tasks: a record it sends to partition p must come back to "
            f"task p; recreate the topic with {task_count} partitions"
        )
        raise KafkaSystemError(msg)


def prepare_changelogs(admin: TopicAdmin, producer: Producer, job: JobConfig, task_count: int) -> None:
    """Create every store's changelog topic when missing and learn its metadata.

    Compacted, one partition per task; warn about stores that have none.
    """
    for store in job.stores.values():
        if store.changelog is not None:
            admin.ensure_topic(
                store.changelog.stream,
                task_count,
                compact=True,
                replication_factor=job.replication_factor,
                expect_partitions=task_count,
            )
            # Learn the topic's metadata now: else the first commit's changelog sends wait
            # for it (~0.4 s on the dev broker) while input waits too.
            producer.partitions_for(store.changelog.stream)
        elif not store.has_side_inputs:
            log.warning("store '%s' has no changelog: it is not logged and cannot be restored", store.name)


def open_inputs(
    job: JobConfig,
    servers: str,
    tasks: list[TaskInstance],
    input_counts: dict[SystemStream, int],
    checkpoints: dict[str, TaskCheckpoint],
) -> Inputs:
    """The consumer of ``tasks``' input partitions, each at its starting offset.

    Its checkpointed offset, else its oldest or upcoming one (``samza.offset.default``).
    """
    consumer = reader_consumer(servers, **client_settings(job.consumer_overrides))
    return Inputs(consumer, input_partitions(job, consumer, tasks, input_counts, checkpoints))


def input_partitions(
    job: JobConfig,
    consumer: Consumer,
    tasks: list[TaskInstance],
    input_counts: dict[SystemStream, int],
    checkpoints: dict[str, TaskCheckpoint],
) -> list[InputPartition]:
    """``tasks``' input partitions, each at its starting offset.

    Its checkpointed offset, else its oldest or upcoming one (``samza.offset.default``).
    """
    tps = [
        (
            task,
            SystemStreamPartition(s.system, s.stream, task.partition),
            TopicPartition(s.stream, task.partition),
        )
        for task in tasks
        for s, count in input_counts.items()
        if task.partition < count
    ]
    if not tps:
        return []
    # The true end, not the reported one (which the dev broker undercounts, see
    # samzapy.kafka.reading): "upcoming" starts there, --exit-at-end stops there.
    ends = true_end_offsets(consumer, [tp for _, _, tp in tps])
    # Not consumer.beginning_offsets: the reads above left the consumer's metadata with the
    # last input's topic only, and kafka-python then answers without the others (KeyError).
    begins = beginning_offsets(consumer, [tp for _, _, tp in tps])
    parts: list[InputPartition] = []
    for task, ssp, tp in tps:
        stream_config = job.stream(ssp.system_stream)
        checkpoint = checkpoints.get(task.task_name)
        if checkpoint is not None and ssp in checkpoint.input_offsets:
            start = checkpoint.input_offsets[ssp]
        elif stream_config.offset_default == "oldest":
            start = begins[tp]
        else:
            start = ends[tp]
        part = InputPartition(ssp, tp, task, stream_config.priority, stream_config.bootstrap, start, ends[tp])
        if stream_config.intermediate:
            part.extra["intermediate"] = True  # the job writes it: read to its end as it grows (inputs.py)
        parts.append(part)
        log.info("%s: %s starts at offset %d (end at start: %d)", task.task_name, ssp, start, ends[tp])
    return parts


def log_start(
    job: JobConfig,
    container_id: int,
    mine: list[int],
    counts: dict[SystemStream, int],
    checkpoints: dict[str, TaskCheckpoint],
) -> None:
    """One line: the job, this container, its tasks, inputs, stores and checkpoints found."""
    log.info(
        "job %s (id %s), container %d of %d: tasks %s; inputs %s; stores %s; %d task checkpoints found",
        job.job_name,
        job.job_id,
        container_id,
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

"""The typed, validated view of a job's configuration: frozen dataclasses only.

``samzapy.config.job.parse_job_config`` builds these from the raw properties; everything
else in samzapy reads configuration through them, never through raw keys.

The defaults written here are the only ones: the key catalogue (:mod:`samzapy.config.keys`)
names, for each key, the field it sets, and documents that field's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from samzapy.config.app import AppConfig
from samzapy.errors import ConfigError
from samzapy.streams import SystemStream
from samzapy.task import IncomingMessageEnvelope, StreamTask

#: A side-input processor: ``(envelope, store) -> [(key, value), ...]`` (docs/side-inputs.md).
Processor: TypeAlias = Callable[[IncomingMessageEnvelope, Any], Iterable[tuple[Any, Any]]]

#: Canonical serde kinds; Samza's factory class names map onto these.
SERDE_KINDS = ("string", "json", "integer", "long", "bytes", "avro")
#: Canonical store engines.
STORE_ENGINES = ("rocksdb", "inmemory")
ROCKSDB_COMPRESSIONS = ("none", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class SerdeSpec:
    """A registered serde: ``serializers.registry.<name>.class`` (+ avro schema paths).

    ``kind`` is one of :data:`SERDE_KINDS`, or the ``module:Class`` of the user's own serde;
    ``factory`` is then what that names (imported once, with the task class), or ``None``
    when the configuration was parsed without importing user code.
    """

    name: str
    kind: str
    schema_path: Path | None = None
    reader_schema_path: Path | None = None
    factory: Any = None

    @property
    def custom(self) -> bool:
        """Whether this is the user's own serde class (``module:Class`` or a dotted path)."""
        return self.kind not in SERDE_KINDS and (":" in self.kind or "." in self.kind)


@dataclass(frozen=True)
class StreamConfig:
    """Per-stream settings: ``systems.<system>.streams.<stream>.*`` with system defaults applied."""

    system_stream: SystemStream
    key_serde: str | None = None
    msg_serde: str | None = None
    bootstrap: bool = False
    priority: int = 0
    offset_default: str | None = None  # "oldest" | "upcoming"; None: the system's default
    partitions: int | None = None  # for outputs created by samzapy
    intermediate: bool = False  # an input the job writes itself: created when missing


@dataclass(frozen=True)
class StoreConfig:
    """A store: ``stores.<name>.*``."""

    name: str
    engine: str = "rocksdb"
    key_serde: str | None = None
    msg_serde: str | None = None
    changelog: SystemStream | None = None
    object_cache_size: int = 1000
    write_batch_size: int = 500
    changelog_coalesce: bool = True  # one changelog record per changed key per commit
    flush_at_head: bool = False  # flushed after each poll that found the input caught up
    local_checkpoint_ms: int = 0  # local checkpoint at most this often (0: every commit)
    cache_size_bytes: int = 100 * 1024 * 1024
    write_buffer_size_bytes: int = 32 * 1024 * 1024
    compression: str = "lz4"
    block_size_bytes: int = 4096
    ttl_ms: int | None = None
    versioned_history_ms: int | None = None  # a versioned table (stores/versioned.py), issue 19
    restore_engine: str = "sequential"  # "sequential" | "spark"
    #: state backends written after commits ("kafka", "blobstore"); the job's default applied
    backup_factories: tuple[str, ...] = ()
    #: state backends restored from; None: those of ``backup_factories``
    restore_factories: tuple[str, ...] | None = None
    side_inputs: tuple[SystemStream, ...] = ()  # topics that fill the store (docs/side-inputs.md)
    side_inputs_processor: str | None = None  # module:Callable; None: key and value bytes as they are
    side_inputs_scope: str = "partition"  # "partition" | "global"
    #: the processor ``side_inputs_processor`` names, imported by
    #: ``parse_job_config(..., check_task_class=True)``
    imported_processor: Processor | None = field(default=None, compare=False, repr=False)

    @property
    def logged(self) -> bool:
        """Whether every write also goes to a changelog (and the store can be restored)."""
        return self.changelog is not None

    @property
    def backs_up_snapshots(self) -> bool:
        """Whether the store's files are uploaded to the blob store after commits (snapshots)."""
        return "blobstore" in self.backup_factories

    @property
    def restores_from_snapshots(self) -> bool:
        """Whether a restore may start from a snapshot in the blob store.

        With restore factories, or the backup factories when no restore factories are set.
        """
        chosen = self.backup_factories if self.restore_factories is None else self.restore_factories
        return "blobstore" in chosen

    @property
    def has_side_inputs(self) -> bool:
        """Whether the store is filled from side-input topics (read-only for tasks)."""
        return bool(self.side_inputs)

    @property
    def processor(self) -> Processor | None:
        """The side-input processor (``None``: records are stored as they are).

        Raises:
            ConfigError: a processor is configured but the configuration was parsed without
                importing user code.
        """
        if self.side_inputs_processor and self.imported_processor is None:
            key = f"stores.{self.name}.side.inputs.processor.factory"
            raise _not_imported(key, self.side_inputs_processor)
        return self.imported_processor


@dataclass(frozen=True)
class ReporterSpec:
    """One configured metrics reporter: ``metrics.reporter.<name>.*``, resolved.

    Attributes:
        name: the name in ``metrics.reporters``.
        kind: ``snapshot``, ``prometheus`` or ``log``.
        stream: where a snapshot reporter sends its snapshots.
        interval_s: seconds between two reports (snapshot, log).
        host: the address a prometheus reporter's HTTP server binds.
        port: its port (0: any free port).
    """

    name: str
    kind: str
    stream: SystemStream | None = None
    interval_s: int = 60
    host: str = "127.0.0.1"
    port: int = 9404


@dataclass(frozen=True)
class JobConfig:
    """Everything samzapy needs to run a job, validated.

    Attributes not listed in DESIGN.md carry Samza's defaults.
    """

    job_name: str
    job_id: str = "1"
    task_class: str = ""
    inputs: tuple[SystemStream, ...] = ()
    window_ms: int | None = None
    commit_ms: int = 60_000
    broker_unavailable_ms: int = 300_000  # how long an unreachable broker is waited out
    container_count: int = 1
    coordinator: str = "passthrough"  # job.coordinator.factory: passthrough (static) or group
    coordinator_group_id: str | None = None  # None: samzapy-<job.name>-<job.id>
    session_timeout_ms: int = 10_000  # group mode: a silent member leaves the group after this
    instance_id: str | None = None  # group mode: static membership (group.instance.id)
    rack: str | None = None  # group mode: standbys avoid the racks of their task's other copies
    standby_replication_factor: int = 1  # 1: no standby copies (samzapy/container/standby.py)
    acceptable_recovery_lag: int = 10_000  # group mode: a move waits for a copy this close (records)
    probing_rebalance_interval_ms: int = 60_000  # group mode: how often warm-up copies are checked
    max_warmup_replicas: int = 2  # group mode: warm-up copies at once (Kafka Streams' default; 0: never)
    max_concurrency: int = 1
    input_order: str = "timestamp"  # task.input.order: timestamp (merged, as the replay) or arrival
    max_idle_ms: int | None = 0  # task.max.idle.ms: wait for a caught-up input; None: never wait
    logged_store_base_dir: Path = Path("state")
    rocksdb_memory_bytes: int | None = None  # one RocksDB memory budget for the process's stores
    processes_per_host: int = 1  # samzapy run --processes: group-mode members under one parent
    consumer_bootstrap_servers: str = "localhost:9092"
    producer_bootstrap_servers: str = "localhost:9092"
    replication_factor: int = 1
    default_partitions: int | None = None
    system_key_serde: str | None = None
    system_msg_serde: str | None = None
    system_offset_default: str = "upcoming"
    drop_deserialization_errors: bool = False
    drop_producer_errors: bool = False  # outputs the producer refuses are dropped and counted
    dead_letter_stream: SystemStream | None = None
    ignored_exceptions: tuple[str, ...] = ()
    streams: dict[SystemStream, StreamConfig] = field(default_factory=dict)
    serializers: dict[str, SerdeSpec] = field(default_factory=dict)
    stores: dict[str, StoreConfig] = field(default_factory=dict)
    consumer_overrides: dict[str, str] = field(default_factory=dict)
    producer_overrides: dict[str, str] = field(default_factory=dict)
    default_system: str = "kafka"
    callback_timeout_ms: int | None = None  # None: an async task may take as long as it likes
    retry_max_attempts: int = 0  # retries of a failed process() before the failure counts
    retry_backoff_ms: int = 100  # pause before the first retry, doubled on each further one
    async_queue_size: int = 1000  # messages an async task may hold before its inputs pause
    process_delay_ms: int | None = None  # async tasks: process at timestamp + this, at the earliest
    query_port: int | None = None  # interactive queries (samzapy/query): None: off, 0: any free port
    query_host: str = "127.0.0.1"
    http_auth_token_file: Path | None = None  # job.http.auth.token.file: guards /, /status.json, /stores
    query_advertised_host: str | None = None  # None: query_host, or the host name for 0.0.0.0
    reporters: tuple[ReporterSpec, ...] = ()  # metrics.reporters, in order (JMX ones left out)
    default_backup_factories: tuple[str, ...] = ()  # stores.backup.factories
    default_restore_factories: tuple[str, ...] | None = None  # stores.restore.factories
    blob_store_uri: str | None = None  # where snapshots live: file:///path or s3://bucket/prefix
    blob_store_s3_endpoint: str | None = None  # an S3-compatible service's URL (None: AWS)
    blob_store_s3_region: str | None = None  # None: boto3's (AWS_REGION, ~/.aws/config)
    snapshot_retention: int = 3  # snapshots kept per task and store
    snapshot_grace_ms: int = 3_600_000  # an unreferenced blob is deleted after this long
    snapshot_max_pending: int = 16  # queued snapshot uploads before a commit waits
    snapshot_max_wait_ms: int = 10_000  # the longest a commit waits for the upload queue
    app_config: AppConfig = field(default_factory=AppConfig)  # what tasks see as context.config
    #: the class ``task_class`` names, imported by ``parse_job_config(..., check_task_class=True)``
    imported_task_class: type[StreamTask] | None = field(default=None, compare=False, repr=False)

    @property
    def task_type(self) -> type[StreamTask]:
        """The task class (``task.class``), imported once when the configuration was parsed.

        Raises:
            ConfigError: the configuration was parsed without importing user code.
        """
        if self.imported_task_class is None:
            raise _not_imported("task.class", self.task_class)  # noqa: EM101 - a key: the factory writes the message
        return self.imported_task_class

    @property
    def group_id(self) -> str:
        """The consumer group the members of a group-mode job form (``job.coordinator.group.id``)."""
        return self.coordinator_group_id or f"samzapy-{self.job_name}-{self.job_id}".replace(" ", "_")

    @property
    def checkpoint_topic(self) -> str:
        """Samza's name for the job's checkpoint topic."""
        return f"__samza_checkpoint_ver_1_for_{self.job_name}_{self.job_id}".replace(" ", "_")

    def stream(self, system_stream: SystemStream) -> StreamConfig:
        """The settings of ``system_stream``, system defaults filled in for serdes."""
        configured = self.streams.get(system_stream)
        if configured is None:
            configured = StreamConfig(system_stream)
        return StreamConfig(
            system_stream=system_stream,
            key_serde=configured.key_serde or self.system_key_serde,
            msg_serde=configured.msg_serde or self.system_msg_serde,
            bootstrap=configured.bootstrap,
            intermediate=configured.intermediate,
            priority=configured.priority,
            offset_default=configured.offset_default or self.system_offset_default,
            partitions=configured.partitions,
        )


def _not_imported(key: str, spec: str) -> ConfigError:
    msg = (
        f"'{key}' = '{spec}' was not imported: parse the configuration with "
        "parse_job_config(config, check_task_class=True), which imports and checks user code once"
    )
    return ConfigError(msg)

"""The catalogue of samzapy's configuration keys, as data.

Every key samzapy reads is one :class:`KeySpec` in :data:`KEYS`: its name pattern, value
type (:mod:`samzapy.config.types`), meaning, and the model field it sets, whose default in
:mod:`samzapy.config.model` is the key's default. The catalogue is the single source for
validation (what a key accepts, which field it fills), for suggestions on misspelt keys, and
for ``docs/configuration.md``.

Patterns name their variable parts ``<system>``, ``<stream>``, ``<store>`` and ``<serde>``;
a pattern ending in ``*`` is a pass-through namespace (anything below it is accepted).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
from dataclasses import dataclass
from typing import Any, TypeAlias

from samzapy.config.app import RESERVED_PREFIXES as RESERVED_PREFIXES
from samzapy.config.app import is_reserved as is_reserved
from samzapy.config.model import JobConfig, ReporterSpec, StoreConfig, StreamConfig
from samzapy.config.types import (
    ANY,
    BLOB_URI,
    BOOL,
    BOOTSTRAP,
    COMPRESSION,
    COORDINATOR_FACTORY,
    DIRECTORY,
    IGNORED,
    NAME,
    PATH,
    REPORTER_CLASS,
    SECRET_FILE,
    SERDE_CLASS,
    SERDE_REF,
    STATE_BACKENDS,
    STORE_FACTORY,
    STREAM,
    STREAM_LIST,
    STRING,
    SYSTEM_FACTORY,
    IntType,
    NameListType,
    NamesType,
    PortType,
    TaskClassType,
    ValueType,
    choice_type,
    int_type,
)


class _FromModel(enum.Enum):
    FROM_MODEL = "the model's default"


#: A key's documented default is its field's default in :mod:`samzapy.config.model`.
FROM_MODEL = _FromModel.FROM_MODEL

#: A model class: one of the dataclasses of :mod:`samzapy.config.model`.
Model: TypeAlias = type

#: Where the keys under a pattern prefix land: the scope (which instance of which model) and
#: the model class. The first matching prefix wins; ``serializers.`` keys build their
#: :class:`~samzapy.config.model.SerdeSpec` by hand (schemas are checked as files).
_SCOPES: tuple[tuple[str, str, Model | None], ...] = (
    ("systems.<system>.streams.<stream>.", "stream", StreamConfig),
    ("systems.<system>.", "system", JobConfig),
    ("stores.<store>.", "store", StoreConfig),
    ("metrics.reporter.<reporter>.", "reporter", ReporterSpec),
    ("serializers.", "serde", None),
    ("", "job", JobConfig),
)


@dataclass(frozen=True)
class KeySpec:
    """One configuration key (or pattern of keys) samzapy knows: its spec, field and default.

    Attributes:
        pattern: the name, with ``<system>``, ``<stream>``, ``<store>``, ``<serde>`` and
            ``<reporter>`` parts.
        type: what the value must be; its parsed value is what the field gets.
        doc_default: how the default reads in the documentation when it is not simply the
            field's default in the model (:data:`FROM_MODEL`), e.g. "the system's".
        meaning: one or two sentences for the documentation.
        section: the heading it is documented under.
        required: whether a job must set it.
        field: the field of :attr:`model` the key sets (``None``: the parser handles it).
        alias_of: the pattern of the key this one is another name for; that key wins.
    """

    pattern: str
    type: ValueType
    doc_default: str | None | _FromModel
    meaning: str
    section: str
    required: bool = False
    field: str | None = None
    alias_of: str | None = None

    @property
    def passthrough(self) -> bool:
        """Whether the pattern is a namespace (``...*``) whose keys are all accepted."""
        return self.pattern.endswith("*")

    @property
    def scope(self) -> str:
        """Which instance the key configures.

        ``job``, ``system``, ``stream``, ``store``, ``reporter`` or ``serde``.

        >>> find_spec("stores.s.factory")[0].scope, find_spec("task.commit.ms")[0].scope
        ('store', 'job')
        """
        return next(scope for prefix, scope, _ in _SCOPES if self.pattern.startswith(prefix))

    @property
    def model(self) -> Model | None:
        """The dataclass :attr:`field` belongs to."""
        return next(model for prefix, _, model in _SCOPES if self.pattern.startswith(prefix))

    @property
    def default(self) -> str | None:
        """The default as users would write it, ``None`` when there is none (docs, messages).

        >>> find_spec("stores.s.object.cache.size")[0].default
        '1000'
        >>> find_spec("task.window.ms")[0].default
        '-1'
        """
        if not isinstance(self.doc_default, _FromModel):
            return self.doc_default
        model = self.model
        if self.required or self.field is None or model is None:
            return None
        return _written(model_default(model, self.field), self.type)

    @property
    def regex(self) -> re.Pattern[str]:
        """The pattern as an anchored regular expression with named groups."""
        return _compile(self.pattern)

    def match(self, key: str) -> dict[str, str] | None:
        """The variable parts of ``key`` if it matches this pattern, else ``None``.

        >>> find_spec("systems.kafka.streams.page.views.samza.bootstrap")[1]
        {'system': 'kafka', 'stream': 'page.views'}
        """
        found = self.regex.fullmatch(key)
        return found.groupdict() if found else None


def model_default(model: Model, name: str) -> Any:
    """The default of field ``name`` of dataclass ``model`` (``None`` when it has none).

    >>> model_default(StoreConfig, "write_batch_size")
    500
    """
    found = next((f for f in dataclasses.fields(model) if f.name == name), None)
    if found is None:
        msg = f"{model.__name__} has no field '{name}'"
        raise LookupError(msg)
    if found.default is not dataclasses.MISSING:
        return found.default
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return None


def _written(value: Any, type_: ValueType) -> str | None:
    """A parsed default as a user writes it: ``None`` -> the disabling value or nothing."""
    if value is None:
        disabled = type_.disabled if isinstance(type_, IntType) else None
        return None if disabled is None else str(disabled)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value in ((), ""):
        return None
    return str(value)


_COMPILED: dict[str, re.Pattern[str]] = {}


def _compile(pattern: str) -> re.Pattern[str]:
    if pattern not in _COMPILED:
        parts = re.split(r"(<\w+>|\*$)", pattern)
        regex = ""
        for part in parts:
            if part == "*":
                regex += r"(?P<rest>.+)"
            elif part.startswith("<"):
                name = part[1:-1]
                regex += rf"(?P<{name}>.+)" if name == "stream" else rf"(?P<{name}>[^.]+)"
            else:
                regex += re.escape(part)
        _COMPILED[pattern] = re.compile(regex)
    return _COMPILED[pattern]


def _key(
    pattern: str,
    type_: ValueType,
    doc_default: str | None | _FromModel,
    meaning: str,
    section: str,
    required: bool = False,
    *,
    field: str | None = None,
    alias_of: str | None = None,
) -> KeySpec:
    return KeySpec(pattern, type_, doc_default, meaning, section, required, field, alias_of)


_JOB, _TASK, _SYS, _STREAM, _SERDE, _STORE, _SNAP, _METRICS, _SAMZA = (
    "Job",
    "Task",
    "Systems",
    "Streams",
    "Serializers",
    "Stores",
    "Snapshots",
    "Metrics",
    "Samza keys samzapy ignores",
)
_S = "systems.<system>."
_T = "systems.<system>.streams.<stream>."
_ST = "stores.<store>."
_R = "metrics.reporter.<reporter>."

#: Every key samzapy reads, in documentation order.
KEYS: tuple[KeySpec, ...] = (
    _key(
        "job.name",
        STRING,
        FROM_MODEL,
        "The job's name; with job.id it names the checkpoint topic.",
        _JOB,
        True,
        field="job_name",
    ),
    _key(
        "job.id",
        STRING,
        FROM_MODEL,
        "Tells apart several deployments of one job (Samza's job.id).",
        _JOB,
        field="job_id",
    ),
    _key(
        "job.container.count",
        int_type(1),
        FROM_MODEL,
        "Number of containers the tasks are split over; start each with `samzapy run --container-id I`.",
        _JOB,
        field="container_count",
    ),
    _key(
        "job.coordinator.factory",
        COORDINATOR_FACTORY,
        FROM_MODEL,
        "How tasks are spread over containers. `passthrough`: statically, container I of "
        "job.container.count runs the tasks p with p % count == I (one `--container-id` per process). "
        "`group`: every `samzapy run` with this configuration joins one Kafka consumer group; the "
        "group's leader places the tasks, and they move by themselves when members join, leave or "
        "crash (docs/operations.md, Scaling out).",
        _JOB,
        field="coordinator",
    ),
    _key(
        "job.coordinator.group.id",
        STRING,
        "samzapy-<job.name>-<job.id>",
        "Group mode: the consumer group of the job's members (also where input offsets are committed, "
        "for kafka-consumer-groups and lag monitors).",
        _JOB,
        field="coordinator_group_id",
    ),
    _key(
        "job.coordinator.session.timeout.ms",
        int_type(1000),
        FROM_MODEL,
        "Group mode: a member that sends no heartbeat for this long is out of the group and its tasks "
        "move (the dev broker answers a join only after about half of it).",
        _JOB,
        field="session_timeout_ms",
    ),
    _key(
        "job.coordinator.instance.id",
        STRING,
        FROM_MODEL,
        "Group mode: static membership (Kafka's group.instance.id): a member restarted with the same id "
        "within the session timeout gets its tasks back without a rebalance. Also `--instance-id`.",
        _JOB,
        field="instance_id",
    ),
    _key(
        "job.coordinator.rack",
        STRING,
        FROM_MODEL,
        "Group mode: this member's rack or zone; standby copies go to members on other racks first.",
        _JOB,
        field="rack",
    ),
    _key(
        "job.coordinator.acceptable.recovery.lag",
        int_type(0),
        FROM_MODEL,
        "Group mode (Kafka Streams' acceptable.recovery.lag): a task moves from a live member to another "
        "only when the other's copy of its stores (a standby, a warm-up copy, local checkpoints) is at most "
        "this many changelog records behind; otherwise it stays and the other member warms up a copy first.",
        _JOB,
        field="acceptable_recovery_lag",
    ),
    _key(
        "job.coordinator.probing.rebalance.interval.ms",
        int_type(100),
        FROM_MODEL,
        "Group mode: while warm-up copies exist, a member holding one asks for a rebalance this often, so "
        "that a task moves once its copy has caught up (a member also asks at once when all its warm-up "
        "copies are within job.coordinator.acceptable.recovery.lag, at most once per 5 s: this interval is "
        "the fallback).",
        _JOB,
        field="probing_rebalance_interval_ms",
    ),
    _key(
        "job.coordinator.max.warmup.replicas",
        int_type(0),
        FROM_MODEL,
        "Group mode: warm-up copies the group keeps at once (Kafka Streams' max.warmup.replicas, same "
        "default); 0 moves tasks at once (a restore on the new member, from a snapshot when the store has "
        "them). A dead member's tasks always move at once.",
        _JOB,
        field="max_warmup_replicas",
    ),
    _key(
        "job.standbytasks.replication.factor",
        int_type(1),
        FROM_MODEL,
        "Copies of each task's stores: 1 keeps only the owner's; R > 1 also keeps R-1 warm standby copies, "
        "container I holding those of containers I-1 .. I-(R-1) (mod job.container.count), so that a "
        "failover replays only a short changelog tail. At most job.container.count (passthrough); in "
        "group mode the leader places the copies on other members.",
        _JOB,
        field="standby_replication_factor",
    ),
    _key(
        "job.logged.store.base.dir",
        DIRECTORY,
        FROM_MODEL,
        "Directory of the stores on disk: `<dir>/<store>/Partition_<N>`. A relative path is taken from "
        "the working directory.",
        _JOB,
        field="logged_store_base_dir",
    ),
    _key(
        "job.rocksdb.memory.bytes",
        int_type(1),
        FROM_MODEL,
        "One memory budget for every RocksDB store of a process (Kafka Streams' bounded-memory "
        "config setter, Flink's managed memory): one block cache of this size for all stores, "
        "index and filter blocks in it, and the memtables charged to it, half of it at most "
        "(each store's memtables sized to its part). It replaces the stores' "
        "`container.cache.size.bytes` and `container.write.buffer.size.bytes` (the latter "
        "still caps a memtable). Unset: per-store memory.",
        _JOB,
        field="rocksdb_memory_bytes",
    ),
    _key(
        "job.processes.per.host",
        int_type(1),
        FROM_MODEL,
        "Group mode: `samzapy run` starts this many members of the job on this host under one "
        "parent (one Python process uses one core), which forwards SIGTERM/SIGINT to them, "
        "restarts a member that crashed, and serves one status page and one `/metrics` (each "
        "sample labelled `process`) for all of them on the job's configured ports; each member "
        "serves its own on a loopback port. Also `--processes N`.",
        _JOB,
        field="processes_per_host",
    ),
    _key(
        "job.default.system",
        NAME,
        "the only configured system (kafka)",
        "The system of the job's streams; must name a configured system.",
        _JOB,
    ),
    _key(
        "job.query.port",
        PortType("a port number from 0 to 65535"),
        FROM_MODEL,
        "Interactive queries: the HTTP port serving `/stores/...` (read-only lookups on the stores; "
        "see docs/queries.md); 0 picks a free one (logged). Unset: off. The same port as a "
        "Prometheus reporter shares its server.",
        _JOB,
        field="query_port",
    ),
    _key(
        "job.query.host",
        STRING,
        FROM_MODEL,
        "Interactive queries: the address the query server binds (the loopback interface unless "
        "opened, e.g. with 0.0.0.0).",
        _JOB,
        field="query_host",
    ),
    _key(
        "job.http.auth.token.file",
        SECRET_FILE,
        None,
        "A file holding a bearer token: the status page (`/`, `/status.json`) and the interactive "
        "queries (`/stores`) then answer only requests with `Authorization: Bearer <token>` (or "
        "`?token=<token>` for a browser), on every HTTP port of the container. `/metrics` and "
        "`/health` stay open for Prometheus and probes. Unset: no token asked.",
        _JOB,
        field="http_auth_token_file",
    ),
    _key(
        "job.query.advertised.host",
        STRING,
        "job.query.host, or the host name when that is 0.0.0.0",
        "Interactive queries: the host other containers and clients reach this container at "
        "(announced in the topic `__samzapy_query_<job>_<id>`).",
        _JOB,
        field="query_advertised_host",
    ),
    _key(
        "task.class",
        TaskClassType("a Python class, module:Class or package.module.Class"),
        FROM_MODEL,
        "The task class, deriving from samzapy.StreamTask. Samza Java class names are not accepted here.",
        _TASK,
        True,
        field="task_class",
    ),
    _key(
        "task.inputs",
        STREAM_LIST,
        FROM_MODEL,
        "Input streams, comma-separated `system.stream`; task N reads partition N of each.",
        _TASK,
        True,
        field="inputs",
    ),
    _key(
        "task.window.ms",
        int_type(1, disabled=-1),
        FROM_MODEL,
        "How often `WindowableTask.window` is called, in milliseconds; -1 never calls it.",
        _TASK,
        field="window_ms",
    ),
    _key(
        "task.commit.ms",
        int_type(1),
        FROM_MODEL,
        "How often offsets, store changelogs and checkpoints are committed, in milliseconds.",
        _TASK,
        field="commit_ms",
    ),
    _key(
        "task.broker.unavailable.ms",
        int_type(0),
        FROM_MODEL,
        "How long a container waits out an unreachable Kafka broker (retrying with backoff, a log "
        "line per attempt, /health showing it) before it fails; long enough for a broker restart.",
        _TASK,
        field="broker_unavailable_ms",
    ),
    _key(
        "task.max.concurrency",
        int_type(1),
        FROM_MODEL,
        "Messages processed at once per task (async tasks); messages of one key stay ordered.",
        _TASK,
        field="max_concurrency",
    ),
    _key(
        "task.input.order",
        choice_type("timestamp", "arrival"),
        FROM_MODEL,
        "How a task with several inputs (a join, a merge) takes their records. `timestamp`: the "
        "smallest record timestamp first, among records at hand (bootstrap streams and higher "
        "`samza.priority` before that; ties by `task.inputs` order, then offset), waiting for an "
        "input whose next records are on the broker, so a streaming run over a backlog and its "
        "Spark replay see the same order. `arrival`: as the polls return them.",
        _TASK,
        field="input_order",
    ),
    _key(
        "task.max.idle.ms",
        int_type(0, disabled=-1),
        FROM_MODEL,
        "With `task.input.order=timestamp`: how long a task waits for a caught-up input to "
        "receive more records before it processes its other inputs, possibly out of timestamp "
        "order (Kafka Streams' `max.task.idle.ms`). 0 waits only for records already on the "
        "broker; -1 never waits. `--exit-at-end` never waits for an input at its end.",
        _TASK,
        field="max_idle_ms",
    ),
    _key(
        "task.drop.deserialization.errors",
        BOOL,
        FROM_MODEL,
        "Skip (and count) messages that cannot be deserialised instead of stopping the job; "
        "with a dead-letter stream they go there instead.",
        _TASK,
        field="drop_deserialization_errors",
    ),
    _key(
        "task.drop.producer.errors",
        BOOL,
        FROM_MODEL,
        "Drop (log and count in `producer-errors-dropped`) an output the producer refuses when it "
        "is queued, e.g. larger than `systems.kafka.producer.max.request.size`, instead of "
        "failing the call (Samza's key). Serialisation errors still fail; a delivery failure "
        "the broker reports fails the commit.",
        _TASK,
        field="drop_producer_errors",
    ),
    _key(
        "task.dead.letter.stream",
        STREAM,
        FROM_MODEL,
        "Where failed messages go (raw, with the error in headers; a reference when larger than "
        "the producer accepts) instead of stopping the job or being skipped. Storage failures "
        "are never dead-lettered.",
        _TASK,
        field="dead_letter_stream",
    ),
    _key(
        "task.ignored.exceptions",
        NameListType("a comma-separated list of exception class names, or *"),
        FROM_MODEL,
        "Exceptions from `process` that do not stop the job (`*` for all): the message goes to the "
        "dead-letter stream if there is one, and is counted.",
        _TASK,
        field="ignored_exceptions",
    ),
    _key(
        "task.callback.timeout.ms",
        int_type(1, disabled=-1),
        FROM_MODEL,
        "How long an async task may take on one message before the job fails; -1 waits forever.",
        _TASK,
        field="callback_timeout_ms",
    ),
    _key(
        "task.retry.max.attempts",
        int_type(0),
        FROM_MODEL,
        "How many times a failed `process` call is retried before the failure counts.",
        _TASK,
        field="retry_max_attempts",
    ),
    _key(
        "task.retry.backoff.ms",
        int_type(0),
        FROM_MODEL,
        "Pause before the first retry, in milliseconds; doubled on each further retry.",
        _TASK,
        field="retry_backoff_ms",
    ),
    _key(
        "task.async.queue.size",
        int_type(1),
        FROM_MODEL,
        "Messages an async task may hold (queued in its lanes, delayed or running); when it is full, "
        "fetching of the task's inputs pauses (backpressure).",
        _TASK,
        field="async_queue_size",
    ),
    _key(
        "task.process.delay.ms",
        int_type(0, disabled=-1),
        FROM_MODEL,
        "Async tasks: process each message no earlier than its timestamp plus this many milliseconds "
        "(a delay queue, bounded by task.async.queue.size); -1 processes at once.",
        _TASK,
        field="process_delay_ms",
    ),
    _key(
        _S + "samza.factory", SYSTEM_FACTORY, "kafka", "The system's kind; samzapy supports Kafka only.", _SYS
    ),
    _key(
        _S + "consumer.bootstrap.servers",
        BOOTSTRAP,
        FROM_MODEL,
        "Kafka brokers to consume from; `embedded` starts the dev broker. If only one of the consumer and "
        "producer settings is given, the other takes its value.",
        _SYS,
        field="consumer_bootstrap_servers",
    ),
    _key(
        _S + "producer.bootstrap.servers",
        BOOTSTRAP,
        FROM_MODEL,
        "Kafka brokers to produce to (outputs, changelogs, checkpoints).",
        _SYS,
        field="producer_bootstrap_servers",
    ),
    _key(
        _S + "default.stream.replication.factor",
        int_type(1),
        FROM_MODEL,
        "Replication factor of topics samzapy creates (changelogs, checkpoints, outputs).",
        _SYS,
        field="replication_factor",
    ),
    _key(
        _S + "default.stream.partitions",
        int_type(1),
        FROM_MODEL,
        "Partition count of output topics samzapy creates; default: the input partition count.",
        _SYS,
        field="default_partitions",
    ),
    _key(
        _S + "samza.key.serde",
        SERDE_REF,
        FROM_MODEL,
        "Default key serde of the system's streams.",
        _SYS,
        field="system_key_serde",
    ),
    _key(
        _S + "samza.msg.serde",
        SERDE_REF,
        FROM_MODEL,
        "Default message serde of the system's streams.",
        _SYS,
        field="system_msg_serde",
    ),
    _key(
        _S + "samza.offset.default",
        choice_type("oldest", "upcoming"),
        FROM_MODEL,
        "Default of `samza.offset.default` for the system's streams.",
        _SYS,
        field="system_offset_default",
    ),
    _key(
        _S + "consumer.*",
        ANY,
        None,
        "Any other kafka-python KafkaConsumer setting, dots for underscores "
        "(`consumer.max.poll.records` -> `max_poll_records`).",
        _SYS,
    ),
    _key(
        _S + "producer.*",
        ANY,
        None,
        "Any other kafka-python KafkaProducer setting, dots for underscores (`producer.linger.ms`); "
        "and samzapy's own `producer.buffer.memory` (bytes held unacknowledged, default 8 MiB).",
        _SYS,
    ),
    _key(
        _T + "samza.key.serde",
        SERDE_REF,
        "the system's",
        "Key serde of the stream.",
        _STREAM,
        field="key_serde",
    ),
    _key(
        _T + "samza.msg.serde",
        SERDE_REF,
        "the system's",
        "Message serde of the stream.",
        _STREAM,
        field="msg_serde",
    ),
    _key(
        _T + "samza.bootstrap",
        BOOL,
        FROM_MODEL,
        "Read the stream to its head before processing other inputs (tables feeding joins).",
        _STREAM,
        field="bootstrap",
    ),
    _key(
        _T + "samza.intermediate",
        BOOL,
        FROM_MODEL,
        "An input the job itself writes (a repartition or subscription topic): created when "
        "missing, with as many partitions as the job has tasks, and checked to have that many.",
        _STREAM,
        field="intermediate",
    ),
    _key(
        _T + "samza.priority",
        int_type(),
        FROM_MODEL,
        "Inputs of higher priority are read first when several have messages.",
        _STREAM,
        field="priority",
    ),
    _key(
        _T + "samza.offset.default",
        choice_type("oldest", "upcoming"),
        "the system's",
        "Where to start reading when there is no checkpoint: the oldest message or only new ones.",
        _STREAM,
        field="offset_default",
    ),
    _key(
        _T + "partitions",
        int_type(1),
        FROM_MODEL,
        "Partition count when samzapy creates the stream.",
        _STREAM,
        field="partitions",
    ),
    _key(
        "serializers.registry.<serde>.class",
        SERDE_CLASS,
        None,
        "Registers a serde under a name; Samza factory class names are accepted.",
        _SERDE,
    ),
    _key(
        "serializers.registry.<serde>.schema",
        PATH,
        None,
        "Avro schema file (.avsc) of an avro serde (required for avro); relative to the config file's "
        "directory.",
        _SERDE,
    ),
    _key(
        "serializers.registry.<serde>.reader.schema",
        PATH,
        None,
        "Avro reader schema, for reading data written with an older writer schema.",
        _SERDE,
    ),
    _key(
        _ST + "factory",
        STORE_FACTORY,
        None,
        "The storage engine; required for each store.",
        _STORE,
        field="engine",
    ),
    _key(
        _ST + "key.serde",
        SERDE_REF,
        FROM_MODEL,
        "Serde of the store's keys (bytes when unset).",
        _STORE,
        field="key_serde",
    ),
    _key(
        _ST + "msg.serde",
        SERDE_REF,
        FROM_MODEL,
        "Serde of the store's values (bytes when unset).",
        _STORE,
        field="msg_serde",
    ),
    _key(
        _ST + "changelog",
        ValueType("a stream name system.stream (or stream, on the default system)"),
        FROM_MODEL,
        "Changelog topic, one partition per task; without it the store is not restored after a move.",
        _STORE,
        field="changelog",
    ),
    _key(
        _ST + "object.cache.size",
        int_type(0),
        FROM_MODEL,
        "Deserialised objects kept in the store's LRU cache; 0 disables it.",
        _STORE,
        field="object_cache_size",
    ),
    _key(
        _ST + "write.batch.size",
        int_type(1),
        FROM_MODEL,
        "Dirty cache entries written to the store (and changelog) in one batch.",
        _STORE,
        field="write_batch_size",
    ),
    _key(
        _ST + "changelog.coalesce",
        BOOL,
        FROM_MODEL,
        "Send the changelog once per commit: the last value of each key changed since the last "
        "commit (Kafka Streams' and Quix's way); false sends every change as it happens. Fewer "
        "records; same state after restore. See docs/performance.md.",
        _STORE,
        field="changelog_coalesce",
    ),
    _key(
        _ST + "flush.at.head",
        BOOL,
        FROM_MODEL,
        "While the input is caught up, flush the store (dirty cache entries, coalesced changelog "
        "changes) after every poll instead of only at the commit, during which input waits. "
        "Lower tail latency, more store writes and changelog records at the head; while the job "
        "is behind it batches and coalesces as before. Same state after restore.",
        _STORE,
        field="flush_at_head",
    ),
    _key(
        _ST + "local.checkpoint.ms",
        int_type(0),
        FROM_MODEL,
        "Take the store's local checkpoint (RocksDB hard links, where a restore starts) at most "
        "this often, and always at the final commit; 0: at every commit. Larger values make "
        "commits cheaper (the stores' checkpoints are spread over commits, a few per commit); a "
        "restore after a crash then replays up to that much more changelog.",
        _STORE,
        field="local_checkpoint_ms",
    ),
    _key(
        _ST + "container.cache.size.bytes",
        int_type(0),
        FROM_MODEL,
        "RocksDB block cache of the store, per container: one cache shared by the store's "
        "instances (one per task), holding its index and filter blocks too.",
        _STORE,
        field="cache_size_bytes",
    ),
    _key(
        _ST + "container.write.buffer.size.bytes",
        int_type(1),
        FROM_MODEL,
        "RocksDB memtable budget of the store, per container (shared by its instances: the one "
        "being written is flushed when their total passes it), and each instance's largest memtable.",
        _STORE,
        field="write_buffer_size_bytes",
    ),
    _key(
        _ST + "rocksdb.compression",
        COMPRESSION,
        FROM_MODEL,
        "RocksDB block compression.",
        _STORE,
        field="compression",
    ),
    _key(
        _ST + "rocksdb.block.size.bytes",
        int_type(1),
        FROM_MODEL,
        "RocksDB block size.",
        _STORE,
        field="block_size_bytes",
    ),
    _key(
        _ST + "rocksdb.ttl.ms",
        int_type(1),
        FROM_MODEL,
        "Entries older than this may be dropped by RocksDB.",
        _STORE,
        field="ttl_ms",
    ),
    _key(
        _ST + "versioned.history.ms",
        int_type(0),
        FROM_MODEL,
        "Makes the store a versioned table (values by event time, `context.get_versioned_store`): "
        "versions are kept this long behind the newest update.",
        _STORE,
        field="versioned_history_ms",
    ),
    _key(
        _ST + "restore.engine",
        choice_type("sequential", "spark"),
        FROM_MODEL,
        "How the store is rebuilt from its changelog: in the container, or by Spark for large backlogs.",
        _STORE,
        field="restore_engine",
    ),
    _key(
        _ST + "backup.factories",
        STATE_BACKENDS,
        "stores.backup.factories",
        "Where the store's state is kept besides the disk: `kafka` (the changelog) and/or `blobstore` "
        "(snapshots of the store's files in blob.store.uri after commits; RocksDB stores with a "
        "changelog). See docs/operations.md, Snapshots.",
        _STORE,
        field="backup_factories",
    ),
    _key(
        _ST + "restore.factories",
        STATE_BACKENDS,
        "stores.restore.factories, else the backup factories",
        "Where a restore may start: `blobstore` lets a task without local files download the newest "
        "usable snapshot, then replay only the changelog after it.",
        _STORE,
        field="restore_factories",
    ),
    _key(
        _ST + "partition.key",
        STRING,
        None,
        "State as data (reshard): `module:function` called with a decoded store key, returning the "
        "bytes the job's partitioner hashes to find its task. Unset: the key itself, in the input "
        "key serde. See docs/operations.md, State as data.",
        _STORE,
    ),
    _key(
        _ST + "side.inputs",
        STREAM_LIST,
        FROM_MODEL,
        "Side inputs: topics that fill this store directly (the topic is its changelog; no "
        "`changelog` of its own). Read-only for tasks; read to the end before any message is "
        "processed, then kept up to date. See docs/side-inputs.md.",
        _STORE,
        field="side_inputs",
    ),
    _key(
        _ST + "side.inputs.processor.factory",
        TaskClassType("module:Callable or package.module.Callable"),
        FROM_MODEL,
        "Turns each side-input record into store writes: a function `(envelope, store) -> "
        "[(key, value), ...]`, or a class whose instances have such a `process` method. Unset: "
        "the record's key and value bytes are stored as they are.",
        _STORE,
        field="side_inputs_processor",
    ),
    _key(
        _ST + "side.inputs.scope",
        choice_type("partition", "global"),
        FROM_MODEL,
        "`partition`: task N's store holds partition N of each side input (Samza's side inputs); "
        "`global`: one store per container holds every partition and all its tasks read it "
        "(Kafka Streams' GlobalKTable).",
        _STORE,
        field="side_inputs_scope",
    ),
    _key(
        "stores.backup.factories",
        STATE_BACKENDS,
        FROM_MODEL,
        "The backup factories of every store that sets none of its own (Samza's job-wide key).",
        _SNAP,
        field="default_backup_factories",
    ),
    _key(
        "stores.restore.factories",
        STATE_BACKENDS,
        FROM_MODEL,
        "The restore factories of every store that sets none of its own.",
        _SNAP,
        field="default_restore_factories",
    ),
    _key(
        "blob.store.uri",
        BLOB_URI,
        FROM_MODEL,
        "Where snapshots live: a directory (`file:///mnt/shared/snapshots`) or an S3 bucket and prefix "
        "(`s3://bucket/prefix`). S3 credentials come from the usual AWS variables and files, never "
        "from this file. Required when a store backs up to `blobstore`.",
        _SNAP,
        field="blob_store_uri",
    ),
    _key(
        "blob.store.s3.endpoint",
        STRING,
        FROM_MODEL,
        "The URL of an S3-compatible service (MinIO, Ceph, ...); unset: AWS S3.",
        _SNAP,
        field="blob_store_s3_endpoint",
    ),
    _key(
        "blob.store.s3.region",
        STRING,
        FROM_MODEL,
        "The S3 region; unset: boto3's (AWS_REGION, ~/.aws/config).",
        _SNAP,
        field="blob_store_s3_region",
    ),
    _key(
        "blob.store.retention.snapshots",
        int_type(1),
        FROM_MODEL,
        "Snapshots kept per task and store (the newest); older ones are deleted after each upload.",
        _SNAP,
        field="snapshot_retention",
    ),
    _key(
        "blob.store.retention.grace.ms",
        int_type(0),
        FROM_MODEL,
        "A file no kept snapshot references is deleted only after it has been unreferenced this long, "
        "so that a restore or another member's upload using it is never cut short; an upload taking "
        "longer than half of it is not published.",
        _SNAP,
        field="snapshot_grace_ms",
    ),
    _key(
        "blob.store.upload.max.pending",
        int_type(1),
        FROM_MODEL,
        "Snapshots queued for upload (at most one per task and store: a newer one replaces a queued "
        "one) before a commit waits for the uploader.",
        _SNAP,
        field="snapshot_max_pending",
    ),
    _key(
        "blob.store.upload.max.wait.ms",
        int_type(0),
        FROM_MODEL,
        "The longest a commit waits for the upload queue; then the oldest queued snapshot is dropped "
        "(snapshots fall behind, processing goes on).",
        _SNAP,
        field="snapshot_max_wait_ms",
    ),
    _key(
        "metrics.reporters",
        NamesType("a comma-separated list of reporter names (without dots)"),
        None,
        "The metrics reporters to run; each is configured with `metrics.reporter.<reporter>.*`.",
        _METRICS,
    ),
    _key(
        _R + "class",
        REPORTER_CLASS,
        "the reporter's name, if it is snapshot, prometheus or log",
        "The reporter's kind: a periodic JSON snapshot to a stream, a Prometheus endpoint with "
        "`/health`, or a log line. Samza's JMX reporter is accepted and skipped with a warning.",
        _METRICS,
        field="kind",
    ),
    _key(
        _R + "stream",
        STREAM,
        FROM_MODEL,
        "Snapshot reporter: the stream its JSON snapshots go to (e.g. kafka.metrics); required.",
        _METRICS,
        field="stream",
    ),
    _key(
        _R + "interval.seconds",
        int_type(1),
        FROM_MODEL,
        "Snapshot and log reporters: seconds between two reports (one more is sent at stop).",
        _METRICS,
        field="interval_s",
    ),
    _key(
        _R + "interval",
        int_type(1),
        FROM_MODEL,
        "Samza's name for `interval.seconds`.",
        _METRICS,
        field="interval_s",
        alias_of=_R + "interval.seconds",
    ),
    _key(
        _R + "port",
        PortType("a port number from 0 to 65535"),
        FROM_MODEL,
        "Prometheus reporter: the HTTP port serving `/metrics` and `/health`; 0 picks a free one "
        "(logged). Give each container on one host its own.",
        _METRICS,
        field="port",
    ),
    _key(
        _R + "host",
        STRING,
        FROM_MODEL,
        "Prometheus reporter: the address the HTTP server binds (the loopback interface unless "
        "opened, e.g. with 0.0.0.0, for Prometheus or probes on other hosts).",
        _METRICS,
        field="host",
    ),
    _key(
        "metrics.*",
        ANY,
        None,
        "Other metrics settings (such as Samza's `metrics.timer.*`): accepted and unused. Keys under "
        "`metrics.reporter.` must be among those above.",
        _METRICS,
    ),
    *(
        _key(name, IGNORED, None, "Accepted for Samza compatibility, not used (a warning is logged).", _SAMZA)
        for name in (
            "job.factory.class",
            "job.coordinator.system",
            "job.coordinator.replication.factor",
            "job.systemstreampartition.grouper.factory",
            "task.checkpoint.factory",
            "task.checkpoint.system",
            "task.checkpoint.replication.factor",
            "task.opts",
        )
    ),
)


def find_spec(key: str) -> tuple[KeySpec, dict[str, str]] | None:
    """The catalogue entry of ``key`` and its variable parts; exact patterns win over namespaces.

    >>> spec, parts = find_spec("stores.my-store.changelog")
    >>> spec.pattern, parts
    ('stores.<store>.changelog', {'store': 'my-store'})
    >>> find_spec("systems.kafka.consumer.bootstrap.servers")[0].pattern
    'systems.<system>.consumer.bootstrap.servers'
    """
    for spec in sorted(KEYS, key=lambda s: s.passthrough):
        parts = spec.match(key)
        if parts is not None:
            return spec, parts
    return None


def _candidates(key: str) -> set[str]:
    """Concrete keys the catalogue patterns would give, with names taken from ``key``'s segments."""
    segments = key.split(".")
    out: set[str] = set()
    for spec in KEYS:
        if spec.passthrough:
            continue
        pattern = spec.pattern.split(".")
        for stream_len in range(1, max(2, len(segments) - len(pattern) + 2)):
            words, i = [], 0
            for word in pattern:
                if word.startswith("<"):
                    take = stream_len if word == "<stream>" else 1
                    words.append(".".join(segments[i : i + take]) or word)
                    i += take
                else:
                    words.append(word)
                    i += 1
            out.add(".".join(words))
    return out


def suggest(key: str) -> str | None:
    """The known key closest to a misspelt ``key``, or ``None``.

    >>> suggest("stores.counts.objet.cache.size")
    'stores.counts.object.cache.size'
    >>> suggest("task.input")
    'task.inputs'
    >>> suggest("systems.kafka.streams.page.views.samza.bootsrap")
    'systems.kafka.streams.page.views.samza.bootstrap'
    """
    matches = difflib.get_close_matches(key, sorted(_candidates(key)), n=1, cutoff=0.75)
    return matches[0] if matches else None

"""The catalogue of samzapy's configuration keys, as data.

Every key samzapy reads is one :class:`KeySpec` in :data:`KEYS`: its name pattern, value
type, default and meaning. The catalogue is the single source for validation (what a key
accepts), for suggestions on misspelt keys, and for ``docs/configuration.md``.

Patterns name their variable parts ``<system>``, ``<stream>``, ``<store>`` and ``<serde>``;
a pattern ending in ``*`` is a pass-through namespace (anything below it is accepted).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from samzapy.config.model import ROCKSDB_COMPRESSIONS
from samzapy.config.properties import parse_bool, parse_int, parse_list
from samzapy.streams import SystemStream

#: Key prefixes owned by samzapy: an unknown key under them is an error.
RESERVED_PREFIXES = ("job.", "task.", "stores.", "systems.", "serializers.", "metrics.")
#: Serde names that work without ``serializers.registry.<name>.class``.
BUILTIN_SERDES = ("string", "json", "integer", "long", "bytes")

_SAMZA_SERDES = "org.apache.samza.serializers."
#: Accepted ``serializers.registry.<serde>.class`` values -> canonical serde kind.
SERDE_CLASS_ALIASES = {
    **{kind: kind for kind in ("string", "json", "integer", "long", "bytes", "avro")},
    _SAMZA_SERDES + "StringSerdeFactory": "string",
    _SAMZA_SERDES + "JsonSerdeFactory": "json",
    _SAMZA_SERDES + "JsonSerdeV2Factory": "json",
    _SAMZA_SERDES + "IntegerSerdeFactory": "integer",
    _SAMZA_SERDES + "LongSerdeFactory": "long",
    _SAMZA_SERDES + "ByteSerdeFactory": "bytes",
    _SAMZA_SERDES + "ByteBufferSerdeFactory": "bytes",
    _SAMZA_SERDES + "AvroSerdeFactory": "avro",
    "samzapy.serdes.StringSerde": "string",
    "samzapy.serdes.JsonSerde": "json",
    "samzapy.serdes.IntegerSerde": "integer",
    "samzapy.serdes.LongSerde": "long",
    "samzapy.serdes.BytesSerde": "bytes",
    "samzapy.serdes.AvroSerde": "avro",
}
#: Accepted ``stores.<store>.factory`` values -> canonical engine.
STORE_FACTORY_ALIASES = {
    "rocksdb": "rocksdb",
    "inmemory": "inmemory",
    "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory": "rocksdb",
    "org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory": "inmemory",
    "org.apache.samza.storage.kv.InMemoryKeyValueStorageEngineFactory": "inmemory",
}
_SAMZA_REPORTERS = "org.apache.samza.metrics.reporter."
#: Accepted ``metrics.reporter.<reporter>.class`` values -> canonical reporter kind. JMX has no
#: Python counterpart: a ``jmx`` reporter is skipped with a warning.
REPORTER_CLASS_ALIASES = {
    **{kind: kind for kind in ("snapshot", "prometheus", "log", "jmx")},
    _SAMZA_REPORTERS + "MetricsSnapshotReporterFactory": "snapshot",
    _SAMZA_REPORTERS + "JmxReporterFactory": "jmx",
}
#: Accepted ``systems.<system>.samza.factory`` values.
SYSTEM_FACTORY_ALIASES = {
    "kafka": "kafka",
    "org.apache.samza.system.kafka.KafkaSystemFactory": "kafka",
}


@dataclass(frozen=True)
class ValueType:
    """What a key accepts: ``describe`` reads after "must be", ``parse`` raises ``ValueError``."""

    description: str

    def parse(self, raw: str) -> Any:
        """The stripped value (the base type accepts any non-empty string)."""
        value = raw.strip()
        if not value:
            raise ValueError(raw)
        return value


@dataclass(frozen=True)
class IntType(ValueType):
    """An integer with a lower bound; ``disabled`` (e.g. -1) parses to ``None``.

    >>> IntType("", minimum=1, disabled=-1).parse("-1") is None
    True
    """

    minimum: int | None = None
    disabled: int | None = None

    def parse(self, raw: str) -> int | None:
        """The integer, or ``None`` for the disabling value."""
        number = parse_int(raw)
        if self.disabled is not None and number == self.disabled:
            return None
        if self.minimum is not None and number < self.minimum:
            raise ValueError(raw)
        return number


def _int(minimum: int | None = None, disabled: int | None = None) -> IntType:
    text = "an integer" if minimum is None else f"an integer >= {minimum}"
    if disabled is not None:
        text += f", or {disabled} to disable"
    return IntType(text, minimum, disabled)


@dataclass(frozen=True)
class BoolType(ValueType):
    """``true`` or ``false``."""

    def parse(self, raw: str) -> bool:
        """The boolean."""
        return parse_bool(raw)


@dataclass(frozen=True)
class ChoiceType(ValueType):
    """One of fixed values (case-insensitive), or an alias of one; parses to the canonical name.

    >>> STORE_FACTORY.parse("org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory")
    'rocksdb'
    """

    choices: dict[str, str] = field(default_factory=dict)

    def parse(self, raw: str) -> str:
        """The canonical value."""
        folded = {k.lower(): v for k, v in self.choices.items()}
        value = folded.get(raw.strip().lower())
        if value is None:
            raise ValueError(raw)
        return value


def _choice(*values: str) -> ChoiceType:
    return ChoiceType(
        " or ".join(values) if len(values) == 2 else "one of " + ", ".join(values), {v: v for v in values}
    )


@dataclass(frozen=True)
class StreamType(ValueType):
    """A ``system.stream`` name.

    >>> StreamType("").parse(" kafka.clicks ")
    SystemStream(system='kafka', stream='clicks')
    """

    def parse(self, raw: str) -> SystemStream:
        """The stream."""
        return SystemStream.parse(raw)


@dataclass(frozen=True)
class StreamListType(ValueType):
    """A non-empty comma-separated list of ``system.stream`` names, without duplicates.

    >>> [str(s) for s in StreamListType("").parse("kafka.a, kafka.b,kafka.a")]
    ['kafka.a', 'kafka.b']
    """

    def parse(self, raw: str) -> tuple[SystemStream, ...]:
        """The streams, in order."""
        streams = [SystemStream.parse(item) for item in parse_list(raw)]
        if not streams:
            raise ValueError(raw)
        return tuple(dict.fromkeys(streams))


@dataclass(frozen=True)
class NameListType(ValueType):
    """A comma-separated list of dotted Python names or ``*``.

    >>> NameListType("").parse("ValueError, mypkg.errors.BadRecord")
    ('ValueError', 'mypkg.errors.BadRecord')
    """

    def parse(self, raw: str) -> tuple[str, ...]:
        """The names."""
        names = parse_list(raw)
        if not names or any(n != "*" and not _DOTTED.fullmatch(n) for n in names):
            raise ValueError(raw)
        return tuple(names)


@dataclass(frozen=True)
class TaskClassType(ValueType):
    """``module:Class`` or ``package.module.Class`` (checked for form only; importing is later)."""

    def parse(self, raw: str) -> str:
        """The spec, stripped."""
        spec = raw.strip()
        module, colon, attr = spec.partition(":")
        ok = _DOTTED.fullmatch(module) and _DOTTED.fullmatch(attr) if colon else "." in spec
        if not ok or not _DOTTED.fullmatch(spec.replace(":", ".")):
            raise ValueError(raw)
        return spec


@dataclass(frozen=True)
class BootstrapType(ValueType):
    """``embedded`` or a comma-separated list of ``host[:port]``.

    >>> BootstrapType("").parse("a:9092, b:9093")
    'a:9092,b:9093'
    """

    def parse(self, raw: str) -> str:
        """The servers, spaces removed."""
        if raw.strip() == "embedded":
            return "embedded"
        servers = parse_list(raw)
        if not servers or not all(
            re.fullmatch(r"[\w.\-]+(:\d{1,5})?|\[[0-9a-fA-F:]+\]:\d{1,5}", s) for s in servers
        ):
            raise ValueError(raw)
        return ",".join(servers)


@dataclass(frozen=True)
class NamesType(ValueType):
    """A comma-separated list of names without dots (each becomes a key segment); may be empty.

    >>> NamesType("").parse("snapshot, prom,snapshot")
    ('snapshot', 'prom')
    """

    def parse(self, raw: str) -> tuple[str, ...]:
        """The names, in order, without duplicates."""
        names = parse_list(raw)
        if any("." in n for n in names):
            raise ValueError(raw)
        return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class PortType(ValueType):
    """A TCP port number, 0 to 65535 (0: any free port).

    >>> PortType("").parse("9404")
    9404
    """

    def parse(self, raw: str) -> int:
        """The port."""
        number = parse_int(raw)
        if not 0 <= number <= 65535:
            raise ValueError(raw)
        return number


@dataclass(frozen=True)
class IgnoredType(ValueType):
    """A Samza key that samzapy accepts and does not use (a warning is logged)."""


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

STRING = ValueType("a non-empty string")
NAME = ValueType("a name")
PATH = ValueType("a file path")
BOOL = BoolType("true or false")
STREAM = StreamType("a stream name system.stream (e.g. kafka.pageviews)")
STREAM_LIST = StreamListType("a non-empty comma-separated list of system.stream names (e.g. kafka.a,kafka.b)")
SERDE_REF = ValueType(
    "a serde name: registered with serializers.registry.<serde>.class or built in "
    "(" + ", ".join(BUILTIN_SERDES) + ")"
)
SERDE_CLASS = ChoiceType(
    "a serde kind (string, json, integer, long, bytes, avro) or a Samza serde factory "
    "class such as org.apache.samza.serializers.StringSerdeFactory",
    SERDE_CLASS_ALIASES,
)
STORE_FACTORY = ChoiceType(
    "rocksdb, inmemory, or a Samza storage engine factory class such as "
    "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
    STORE_FACTORY_ALIASES,
)
SYSTEM_FACTORY = ChoiceType(
    "kafka or org.apache.samza.system.kafka.KafkaSystemFactory", SYSTEM_FACTORY_ALIASES
)
BOOTSTRAP = BootstrapType("'embedded' or a comma-separated list of host:port")
REPORTER_CLASS = ChoiceType(
    "snapshot, prometheus, log, or a Samza reporter factory class such as "
    "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory",
    REPORTER_CLASS_ALIASES,
)
ANY = ValueType("any value")
IGNORED = IgnoredType("any value (ignored by samzapy)")


@dataclass(frozen=True)
class KeySpec:
    """One configuration key (or pattern of keys) samzapy knows.

    Attributes:
        pattern: the name, with ``<system>``, ``<stream>``, ``<store>``, ``<serde>`` parts.
        type: what the value must be.
        default: the default as users write it, ``None`` when there is none.
        meaning: one or two sentences for the documentation.
        section: the heading it is documented under.
        required: whether a job must set it.
    """

    pattern: str
    type: ValueType
    default: str | None
    meaning: str
    section: str
    required: bool = False

    @property
    def passthrough(self) -> bool:
        """Whether the pattern is a namespace (``...*``) whose keys are all accepted."""
        return self.pattern.endswith("*")

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
    pattern: str, type_: ValueType, default: str | None, meaning: str, section: str, required: bool = False
) -> KeySpec:
    return KeySpec(pattern, type_, default, meaning, section, required)


_JOB, _TASK, _SYS, _STREAM, _SERDE, _STORE, _METRICS, _SAMZA = (
    "Job",
    "Task",
    "Systems",
    "Streams",
    "Serializers",
    "Stores",
    "Metrics",
    "Samza keys samzapy ignores",
)
_S = "systems.<system>."
_T = "systems.<system>.streams.<stream>."
_ST = "stores.<store>."
_R = "metrics.reporter.<reporter>."

#: Every key samzapy reads, in documentation order.
KEYS: tuple[KeySpec, ...] = (
    _key("job.name", STRING, None, "The job's name; with job.id it names the checkpoint topic.", _JOB, True),
    _key("job.id", STRING, "1", "Tells apart several deployments of one job (Samza's job.id).", _JOB),
    _key(
        "job.container.count",
        _int(1),
        "1",
        "Number of containers the tasks are split over; start each with `samzapy run --container-id I`.",
        _JOB,
    ),
    _key(
        "job.standbytasks.replication.factor",
        _int(1),
        "1",
        "Copies of each task's stores: 1 keeps only the owner's; R > 1 also keeps R-1 warm standby copies, "
        "container I holding those of containers I-1 .. I-(R-1) (mod job.container.count), so that a "
        "failover replays only a short changelog tail. At most job.container.count.",
        _JOB,
    ),
    _key(
        "job.logged.store.base.dir",
        PATH,
        "state",
        "Directory of the stores on disk: `<dir>/<store>/Partition_<N>`. A relative path is taken from "
        "the working directory.",
        _JOB,
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
        None,
        "Interactive queries: the HTTP port serving `/stores/...` (read-only lookups on the stores; "
        "see docs/queries.md); 0 picks a free one (logged). Unset: off. The same port as a "
        "Prometheus reporter shares its server.",
        _JOB,
    ),
    _key(
        "job.query.host",
        STRING,
        "0.0.0.0",
        "Interactive queries: the address the query server binds.",
        _JOB,
    ),
    _key(
        "job.query.advertised.host",
        STRING,
        "job.query.host, or the host name when that is 0.0.0.0",
        "Interactive queries: the host other containers and clients reach this container at "
        "(announced in the topic `__samzapy_query_<job>_<id>`).",
        _JOB,
    ),
    _key(
        "task.class",
        TaskClassType("a Python class, module:Class or package.module.Class"),
        None,
        "The task class, deriving from samzapy.StreamTask. Samza Java class names are not accepted here.",
        _TASK,
        True,
    ),
    _key(
        "task.inputs",
        STREAM_LIST,
        None,
        "Input streams, comma-separated `system.stream`; task N reads partition N of each.",
        _TASK,
        True,
    ),
    _key(
        "task.window.ms",
        _int(1, disabled=-1),
        "-1",
        "How often `WindowableTask.window` is called, in milliseconds; -1 never calls it.",
        _TASK,
    ),
    _key(
        "task.commit.ms",
        _int(1),
        "60000",
        "How often offsets, store changelogs and checkpoints are committed, in milliseconds.",
        _TASK,
    ),
    _key(
        "task.broker.unavailable.ms",
        _int(0),
        "300000",
        "How long a container waits out an unreachable Kafka broker (retrying with backoff, a log "
        "line per attempt, /health showing it) before it fails; long enough for a broker restart.",
        _TASK,
    ),
    _key(
        "task.max.concurrency",
        _int(1),
        "1",
        "Messages processed at once per task (async tasks); messages of one key stay ordered.",
        _TASK,
    ),
    _key(
        "task.drop.deserialization.errors",
        BOOL,
        "false",
        "Skip (and count) messages that cannot be deserialised instead of stopping the job.",
        _TASK,
    ),
    _key(
        "task.dead.letter.stream",
        STREAM,
        None,
        "Where bad messages go (raw, with the error in headers) instead of stopping the job.",
        _TASK,
    ),
    _key(
        "task.ignored.exceptions",
        NameListType("a comma-separated list of exception class names, or *"),
        None,
        "Exceptions from `process` that do not stop the job (`*` for all): the message goes to the "
        "dead-letter stream if there is one, and is counted.",
        _TASK,
    ),
    _key(
        "task.callback.timeout.ms",
        _int(1, disabled=-1),
        "-1",
        "How long an async task may take on one message before the job fails; -1 waits forever.",
        _TASK,
    ),
    _key(
        "task.retry.max.attempts",
        _int(0),
        "0",
        "How many times a failed `process` call is retried before the failure counts.",
        _TASK,
    ),
    _key(
        "task.retry.backoff.ms",
        _int(0),
        "100",
        "Pause before the first retry, in milliseconds; doubled on each further retry.",
        _TASK,
    ),
    _key(
        "task.async.queue.size",
        _int(1),
        "1000",
        "Messages an async task may hold (queued in its lanes, delayed or running); when it is full, "
        "fetching of the task's inputs pauses (backpressure).",
        _TASK,
    ),
    _key(
        "task.process.delay.ms",
        _int(0, disabled=-1),
        "-1",
        "Async tasks: process each message no earlier than its timestamp plus this many milliseconds "
        "(a delay queue, bounded by task.async.queue.size); -1 processes at once.",
        _TASK,
    ),
    _key(
        _S + "samza.factory", SYSTEM_FACTORY, "kafka", "The system's kind; samzapy supports Kafka only.", _SYS
    ),
    _key(
        _S + "consumer.bootstrap.servers",
        BOOTSTRAP,
        "localhost:9092",
        "Kafka brokers to consume from; `embedded` starts the dev broker. If only one of the consumer and "
        "producer settings is given, the other takes its value.",
        _SYS,
    ),
    _key(
        _S + "producer.bootstrap.servers",
        BOOTSTRAP,
        "localhost:9092",
        "Kafka brokers to produce to (outputs, changelogs, checkpoints).",
        _SYS,
    ),
    _key(
        _S + "default.stream.replication.factor",
        _int(1),
        "1",
        "Replication factor of topics samzapy creates (changelogs, checkpoints, outputs).",
        _SYS,
    ),
    _key(
        _S + "default.stream.partitions",
        _int(1),
        None,
        "Partition count of output topics samzapy creates; default: the input partition count.",
        _SYS,
    ),
    _key(_S + "samza.key.serde", SERDE_REF, None, "Default key serde of the system's streams.", _SYS),
    _key(_S + "samza.msg.serde", SERDE_REF, None, "Default message serde of the system's streams.", _SYS),
    _key(
        _S + "samza.offset.default",
        _choice("oldest", "upcoming"),
        "upcoming",
        "Default of `samza.offset.default` for the system's streams.",
        _SYS,
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
        "Any other kafka-python KafkaProducer setting, dots for underscores (`producer.linger.ms`).",
        _SYS,
    ),
    _key(_T + "samza.key.serde", SERDE_REF, "the system's", "Key serde of the stream.", _STREAM),
    _key(_T + "samza.msg.serde", SERDE_REF, "the system's", "Message serde of the stream.", _STREAM),
    _key(
        _T + "samza.bootstrap",
        BOOL,
        "false",
        "Read the stream to its head before processing other inputs (tables feeding joins).",
        _STREAM,
    ),
    _key(
        _T + "samza.intermediate",
        BOOL,
        "false",
        "An input the job itself writes (a repartition or subscription topic): created when "
        "missing, with as many partitions as the job has tasks, and checked to have that many.",
        _STREAM,
    ),
    _key(
        _T + "samza.priority",
        _int(),
        "0",
        "Inputs of higher priority are read first when several have messages.",
        _STREAM,
    ),
    _key(
        _T + "samza.offset.default",
        _choice("oldest", "upcoming"),
        "the system's",
        "Where to start reading when there is no checkpoint: the oldest message or only new ones.",
        _STREAM,
    ),
    _key(_T + "partitions", _int(1), None, "Partition count when samzapy creates the stream.", _STREAM),
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
    _key(_ST + "factory", STORE_FACTORY, None, "The storage engine; required for each store.", _STORE),
    _key(_ST + "key.serde", SERDE_REF, None, "Serde of the store's keys (bytes when unset).", _STORE),
    _key(_ST + "msg.serde", SERDE_REF, None, "Serde of the store's values (bytes when unset).", _STORE),
    _key(
        _ST + "changelog",
        ValueType("a stream name system.stream (or stream, on the default system)"),
        None,
        "Changelog topic, one partition per task; without it the store is not restored after a move.",
        _STORE,
    ),
    _key(
        _ST + "object.cache.size",
        _int(0),
        "1000",
        "Deserialised objects kept in the store's LRU cache; 0 disables it.",
        _STORE,
    ),
    _key(
        _ST + "write.batch.size",
        _int(1),
        "500",
        "Dirty cache entries written to the store (and changelog) in one batch.",
        _STORE,
    ),
    _key(
        _ST + "changelog.coalesce",
        BOOL,
        "true",
        "Send the changelog once per commit: the last value of each key changed since the last "
        "commit (Kafka Streams' and Quix's way); false sends every change as it happens. Fewer "
        "records; same state after restore. See docs/performance.md.",
        _STORE,
    ),
    _key(
        _ST + "flush.at.head",
        BOOL,
        "false",
        "While the input is caught up, flush the store (dirty cache entries, coalesced changelog "
        "changes) after every poll instead of only at the commit, during which input waits. "
        "Lower tail latency, more store writes and changelog records at the head; while the job "
        "is behind it batches and coalesces as before. Same state after restore.",
        _STORE,
    ),
    _key(
        _ST + "local.checkpoint.ms",
        _int(0),
        "0",
        "Take the store's local checkpoint (RocksDB hard links, where a restore starts) at most "
        "this often, and always at the final commit; 0: at every commit. Larger values make "
        "commits cheaper (the stores' checkpoints are spread over commits, a few per commit); a "
        "restore after a crash then replays up to that much more changelog.",
        _STORE,
    ),
    _key(
        _ST + "container.cache.size.bytes",
        _int(0),
        "104857600",
        "RocksDB block cache of the store, per container: one cache shared by the store's "
        "instances (one per task), holding its index and filter blocks too.",
        _STORE,
    ),
    _key(
        _ST + "container.write.buffer.size.bytes",
        _int(1),
        "33554432",
        "RocksDB memtable budget of the store, per container (shared by its instances: the one "
        "being written is flushed when their total passes it), and each instance's largest memtable.",
        _STORE,
    ),
    _key(
        _ST + "rocksdb.compression",
        _choice(*ROCKSDB_COMPRESSIONS),
        "lz4",
        "RocksDB block compression.",
        _STORE,
    ),
    _key(_ST + "rocksdb.block.size.bytes", _int(1), "4096", "RocksDB block size.", _STORE),
    _key(_ST + "rocksdb.ttl.ms", _int(1), None, "Entries older than this may be dropped by RocksDB.", _STORE),
    _key(
        _ST + "restore.engine",
        _choice("sequential", "spark"),
        "sequential",
        "How the store is rebuilt from its changelog: in the container, or by Spark for large backlogs.",
        _STORE,
    ),
    _key(
        _ST + "side.inputs",
        STREAM_LIST,
        None,
        "Side inputs: topics that fill this store directly (the topic is its changelog; no "
        "`changelog` of its own). Read-only for tasks; read to the end before any message is "
        "processed, then kept up to date. See docs/side-inputs.md.",
        _STORE,
    ),
    _key(
        _ST + "side.inputs.processor.factory",
        TaskClassType("module:Callable or package.module.Callable"),
        None,
        "Turns each side-input record into store writes: a function `(envelope, store) -> "
        "[(key, value), ...]`, or a class whose instances have such a `process` method. Unset: "
        "the record's key and value bytes are stored as they are.",
        _STORE,
    ),
    _key(
        _ST + "side.inputs.scope",
        _choice("partition", "global"),
        "partition",
        "`partition`: task N's store holds partition N of each side input (Samza's side inputs); "
        "`global`: one store per container holds every partition and all its tasks read it "
        "(Kafka Streams' GlobalKTable).",
        _STORE,
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
    ),
    _key(
        _R + "stream",
        STREAM,
        None,
        "Snapshot reporter: the stream its JSON snapshots go to (e.g. kafka.metrics); required.",
        _METRICS,
    ),
    _key(
        _R + "interval.seconds",
        _int(1),
        "60",
        "Snapshot and log reporters: seconds between two reports (one more is sent at stop).",
        _METRICS,
    ),
    _key(_R + "interval", _int(1), "60", "Samza's name for `interval.seconds`.", _METRICS),
    _key(
        _R + "port",
        PortType("a port number from 0 to 65535"),
        "9404",
        "Prometheus reporter: the HTTP port serving `/metrics` and `/health`; 0 picks a free one "
        "(logged). Give each container on one host its own.",
        _METRICS,
    ),
    _key(_R + "host", STRING, "0.0.0.0", "Prometheus reporter: the address the HTTP server binds.", _METRICS),
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


def is_reserved(key: str) -> bool:
    """Whether ``key`` lies in a namespace owned by samzapy (else it is an application key).

    >>> is_reserved("stores.s.factory"), is_reserved("app.threshold")
    (True, False)
    """
    return key.startswith(RESERVED_PREFIXES)


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

"""What configuration values may be: the value types of the key catalogue.

Each :class:`ValueType` describes what it accepts (the text after "must be" in a message) and
parses a raw string into the value the model field gets, raising ``ValueError`` for anything
else. The Samza class names samzapy accepts as aliases are here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samzapy.config.model import ROCKSDB_COMPRESSIONS
from samzapy.config.properties import parse_bool, parse_int, parse_list
from samzapy.streams import SystemStream

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
#: Accepted ``job.coordinator.factory`` values -> canonical coordinator kind.
COORDINATOR_FACTORY_ALIASES = {
    "passthrough": "passthrough",
    "org.apache.samza.standalone.PassthroughJobCoordinatorFactory": "passthrough",
    "group": "group",
    "samzapy.coordinator.KafkaGroupCoordinatorFactory": "group",
}
#: Accepted ``stores.<store>.backup.factories`` / ``restore.factories`` names -> canonical
#: state backend (Samza's StateBackendFactory classes).
STATE_BACKEND_ALIASES = {
    "kafka": "kafka",
    "org.apache.samza.storage.KafkaChangelogStateBackendFactory": "kafka",
    "blobstore": "blobstore",
    "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory": "blobstore",
}
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
class SecretFileType(ValueType):
    """A file holding a secret (a bearer token).

    It must exist, be readable and not be empty; ``~`` expanded, a relative path taken from the
    working directory.
    """

    def parse(self, raw: str) -> Path:
        """The path, checked."""
        path = Path(super().parse(raw)).expanduser()
        try:
            if path.read_text().strip():
                return path
        except (OSError, UnicodeDecodeError):
            pass
        raise ValueError(raw)


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


def int_type(minimum: int | None = None, disabled: int | None = None) -> IntType:
    """An :class:`IntType` whose description says its bound and its disabling value."""
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


def choice_type(*values: str) -> ChoiceType:
    """A :class:`ChoiceType` of ``values``, each its own canonical name."""
    return ChoiceType(
        " or ".join(values) if len(values) == 2 else "one of " + ", ".join(values), {v: v for v in values}
    )


@dataclass(frozen=True)
class ChoiceListType(ValueType):
    """A comma-separated list of fixed values (or their aliases), possibly empty.

    Parses to the canonical names, in order, without duplicates.

    >>> STATE_BACKENDS.parse("org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory, kafka")
    ('blobstore', 'kafka')
    """

    choices: dict[str, str] = field(default_factory=dict)

    def parse(self, raw: str) -> tuple[str, ...]:
        """The canonical names."""
        folded = {k.lower(): v for k, v in self.choices.items()}
        found = [folded.get(name.lower()) for name in parse_list(raw)]
        if any(v is None for v in found):
            raise ValueError(raw)
        return tuple(dict.fromkeys(v for v in found if v is not None))


@dataclass(frozen=True)
class BlobUriType(ValueType):
    """Where store snapshots live: ``file:///absolute/path`` or ``s3://bucket[/prefix]``.

    >>> BLOB_URI.parse("s3://my-bucket/snapshots")
    's3://my-bucket/snapshots'
    """

    def parse(self, raw: str) -> str:
        """The URI, checked for form."""
        uri: str = super().parse(raw)
        if not re.fullmatch(r"file:///.+|s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?", uri):
            raise ValueError(raw)
        return uri


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
class DirType(ValueType):
    """A directory path, ``~`` expanded; a relative one stays relative to the working directory.

    >>> DirType("").parse("data/state")
    PosixPath('data/state')
    """

    def parse(self, raw: str) -> Path:
        """The path."""
        return Path(super().parse(raw)).expanduser()


@dataclass(frozen=True)
class IgnoredType(ValueType):
    """A Samza key that samzapy accepts and does not use (a warning is logged)."""


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

STRING = ValueType("a non-empty string")
NAME = ValueType("a name")
PATH = ValueType("a file path")
DIRECTORY = DirType("a file path")
SECRET_FILE = SecretFileType("a readable, non-empty file (the bearer token)")
BOOL = BoolType("true or false")
STREAM = StreamType("a stream name system.stream (e.g. kafka.pageviews)")
STREAM_LIST = StreamListType("a non-empty comma-separated list of system.stream names (e.g. kafka.a,kafka.b)")
SERDE_REF = ValueType(
    "a serde name: registered with serializers.registry.<serde>.class or built in "
    "(" + ", ".join(BUILTIN_SERDES) + ")"
)


@dataclass(frozen=True)
class SerdeClassType(ChoiceType):
    """A serde kind or alias, or the user's own serde class.

    A kind or alias parses to the kind; the user's own serde, as ``module:Class`` or
    ``package.module.Class``, parses to itself (imported with the task class). A Java class name
    samzapy has no counterpart for (``org.apache.samza.*``, ``com.*``, ...) is refused.

    >>> SERDE_CLASS.parse("org.apache.samza.serializers.JsonSerdeFactory"), SERDE_CLASS.parse("my.serdes:Csv")
    ('json', 'my.serdes:Csv')
    """

    def parse(self, raw: str) -> str:
        """The serde kind, or the user's ``module:Class``."""
        try:
            return super().parse(raw)
        except ValueError:
            pass
        value = raw.strip()
        java = value.startswith(("org.", "com.", "io.", "net.")) and ":" not in value
        if java or not _PYTHON_PATH.match(value):
            raise ValueError(raw)
        return value


_PYTHON_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?$")
SERDE_CLASS = SerdeClassType(
    "a serde kind (string, json, integer, long, bytes, avro), one of Samza's serde factories "
    "samzapy has a counterpart for (org.apache.samza.serializers.StringSerdeFactory, "
    "JsonSerdeFactory, JsonSerdeV2Factory, IntegerSerdeFactory, LongSerdeFactory, ByteSerdeFactory, "
    "ByteBufferSerdeFactory, AvroSerdeFactory), or your own Python serde as module:Class "
    "(docs/configuration.md, 'Your own serde')",
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
COORDINATOR_FACTORY = ChoiceType(
    "passthrough or group (or org.apache.samza.standalone.PassthroughJobCoordinatorFactory, "
    "samzapy.coordinator.KafkaGroupCoordinatorFactory)",
    COORDINATOR_FACTORY_ALIASES,
)
BOOTSTRAP = BootstrapType("'embedded' or a comma-separated list of host:port")
REPORTER_CLASS = ChoiceType(
    "snapshot, prometheus, log, or a Samza reporter factory class such as "
    "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory",
    REPORTER_CLASS_ALIASES,
)
STATE_BACKENDS = ChoiceListType(
    "a comma-separated list of kafka, blobstore (or "
    "org.apache.samza.storage.KafkaChangelogStateBackendFactory, "
    "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory)",
    STATE_BACKEND_ALIASES,
)
BLOB_URI = BlobUriType("file:///absolute/path or s3://bucket[/prefix]")
ANY = ValueType("any value")
IGNORED = IgnoredType("any value (ignored by samzapy)")

COMPRESSION = choice_type(*ROCKSDB_COMPRESSIONS)

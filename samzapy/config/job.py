"""From raw properties to a validated :class:`JobConfig`, every problem reported at once.

:func:`parse_job_config` checks every key under samzapy's reserved prefixes against the
catalogue in :mod:`samzapy.config.keys`, then the references between keys (serdes, systems,
stores), and raises one :class:`ConfigError` listing all problems, each with the key, its
value, its file and line, and what is accepted. Nothing touches a broker.
"""

from __future__ import annotations

import difflib
import logging
from pathlib import Path
from typing import Any

from samzapy.config import keys as catalogue
from samzapy.config.keys import BUILTIN_SERDES, IGNORED, SERDE_REF, KeySpec
from samzapy.config.model import JobConfig, SerdeSpec, StoreConfig, StreamConfig
from samzapy.config.properties import Config, config_error
from samzapy.errors import ConfigError
from samzapy.streams import SystemStream

log = logging.getLogger(__name__)

_JOB_FIELDS = {  # key -> JobConfig field, for keys whose parsed value is stored as it is
    "job.name": "job_name",
    "job.id": "job_id",
    "task.class": "task_class",
    "task.inputs": "inputs",
    "task.window.ms": "window_ms",
    "task.commit.ms": "commit_ms",
    "task.broker.unavailable.ms": "broker_unavailable_ms",
    "task.max.concurrency": "max_concurrency",
    "task.drop.deserialization.errors": "drop_deserialization_errors",
    "task.dead.letter.stream": "dead_letter_stream",
    "task.ignored.exceptions": "ignored_exceptions",
    "task.callback.timeout.ms": "callback_timeout_ms",
    "task.retry.max.attempts": "retry_max_attempts",
    "task.retry.backoff.ms": "retry_backoff_ms",
    "job.container.count": "container_count",
    "job.query.port": "query_port",
    "job.query.host": "query_host",
    "job.query.advertised.host": "query_advertised_host",
    "job.standbytasks.replication.factor": "standby_replication_factor",
    "task.async.queue.size": "async_queue_size",
    "task.process.delay.ms": "process_delay_ms",
}
_SYSTEM_FIELDS = {  # suffix of systems.<system>. -> JobConfig field
    "default.stream.replication.factor": "replication_factor",
    "default.stream.partitions": "default_partitions",
    "samza.key.serde": "system_key_serde",
    "samza.msg.serde": "system_msg_serde",
    "samza.offset.default": "system_offset_default",
}
_STREAM_FIELDS = {  # suffix of systems.<system>.streams.<stream>. -> StreamConfig field
    "samza.key.serde": "key_serde",
    "samza.msg.serde": "msg_serde",
    "samza.bootstrap": "bootstrap",
    "samza.intermediate": "intermediate",
    "samza.priority": "priority",
    "samza.offset.default": "offset_default",
    "partitions": "partitions",
}
_STORE_FIELDS = {  # suffix of stores.<store>. -> StoreConfig field
    "factory": "engine",
    "key.serde": "key_serde",
    "msg.serde": "msg_serde",
    "object.cache.size": "object_cache_size",
    "write.batch.size": "write_batch_size",
    "changelog.coalesce": "changelog_coalesce",
    "flush.at.head": "flush_at_head",
    "local.checkpoint.ms": "local_checkpoint_ms",
    "container.cache.size.bytes": "cache_size_bytes",
    "container.write.buffer.size.bytes": "write_buffer_size_bytes",
    "rocksdb.compression": "compression",
    "rocksdb.block.size.bytes": "block_size_bytes",
    "rocksdb.ttl.ms": "ttl_ms",
    "restore.engine": "restore_engine",
    "side.inputs": "side_inputs",
    "side.inputs.processor.factory": "side_inputs_processor",
    "side.inputs.scope": "side_inputs_scope",
}
_DEFAULT_SERVERS = "localhost:9092"


def parse_job_config(config: Config, *, check_task_class: bool = False) -> JobConfig:
    """Validate ``config`` and build the job's :class:`JobConfig`.

    Args:
        config: the raw configuration (:func:`samzapy.config.load_config`).
        check_task_class: also import ``task.class`` and report it among the problems
            (off by default: importing runs user code).

    Raises:
        ConfigError: listing every problem found (``error.problems``), one line each.
    """
    return _JobParser(config).parse(check_task_class)


class _JobParser:
    """One validation pass: collects parsed values and problems, then builds the model."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.problems: list[tuple[int, str]] = []
        self.parsed: dict[str, Any] = {}
        self.systems: dict[str, str] = {}  # configured system -> first key naming it
        self.stream_keys: list[tuple[str, str, str]] = []  # (key, system, stream)
        self.stores: dict[str, str] = {}
        self.serdes: dict[str, str] = {}
        self.passthrough: list[tuple[str, dict[str, str]]] = []

    # -- problems ---------------------------------------------------------------------------

    def problem(self, key: str | None, message: str) -> None:
        line = self.config.entry(key).line if key in self.config else 0
        self.problems.append((line, message))

    def at(self, key: str) -> str:
        return self.config.location(key)

    def invalid(self, key: str, expected: str) -> None:
        self.problem(
            key, f"Invalid value '{self.config[key]}' for '{key}' ({self.at(key)}): must be {expected}"
        )

    # -- pass 1: every key on its own -------------------------------------------------------

    def classify(self) -> None:
        for key in self.config:
            if catalogue.is_reserved(key):
                self.classify_key(key)

    def classify_key(self, key: str) -> None:
        found = catalogue.find_spec(key)
        if found is None:
            hint = catalogue.suggest(key)
            tail = (
                f"did you mean '{hint}'?"
                if hint
                else "not a samzapy setting (see docs/configuration.md; application keys must not "
                "start with " + ", ".join(catalogue.RESERVED_PREFIXES) + ")"
            )
            self.problem(key, f"Unknown key '{key}' ({self.at(key)}): {tail}")
            return
        spec, parts = found
        self.note_names(key, spec, parts)
        if spec.type is IGNORED:
            log.warning("%s (%s) is a Samza setting samzapy does not use: ignored", key, self.at(key))
        elif spec.passthrough:
            self.passthrough.append((key, parts))
        else:
            try:
                self.parsed[key] = spec.type.parse(self.config[key])
            except ValueError:
                self.invalid(key, spec.type.description)

    def note_names(self, key: str, spec: KeySpec, parts: dict[str, str]) -> None:
        if "stream" in parts:
            self.stream_keys.append((key, parts["system"], parts["stream"]))
        elif "system" in parts:
            self.systems.setdefault(parts["system"], key)
        if "store" in parts:
            self.stores.setdefault(parts["store"], key)
        if "serde" in parts:
            self.serdes.setdefault(parts["serde"], key)

    # -- pass 2: references between keys ----------------------------------------------------

    def check_required(self) -> None:
        for spec in catalogue.KEYS:
            if spec.required and spec.pattern not in self.config:
                self.problem(None, f"'{spec.pattern}' is required ({self.config.source}): {spec.meaning}")

    def resolve_system(self) -> str:
        configured = sorted(self.systems) or ["kafka"]
        if len(configured) > 1:
            where = ", ".join(f"'{s}' ({self.at(self.systems[s])})" for s in configured)
            self.problem(
                self.systems[configured[1]],
                f"Several systems are configured: {where}; samzapy runs a job on one Kafka system: "
                "use one system name throughout",
            )
        name = self.parsed.get("job.default.system")
        if name is not None and name not in configured:
            self.invalid("job.default.system", "a configured system (" + ", ".join(configured) + ")")
        return name if name in configured else configured[0]

    def check_system(self, key: str, stream: SystemStream, system: str) -> bool:
        if stream.system == system:
            return True
        self.problem(
            key,
            f"Stream '{stream}' in '{key}' ({self.at(key)}) is on system '{stream.system}', which is not "
            f"configured: must be on '{system}' (e.g. {system}.{stream.stream})",
        )
        return False

    def check_serde_refs(self, registered: dict[str, SerdeSpec]) -> None:
        for key, value in self.parsed.items():
            spec = catalogue.find_spec(key)
            if spec is None or spec[0].type is not SERDE_REF or value in registered:
                continue
            hint = difflib.get_close_matches(value, list(registered), n=1)
            tail = f"did you mean '{hint[0]}'? " if hint else ""
            self.problem(
                key,
                f"Unknown serde '{value}' for '{key}' ({self.at(key)}): {tail}must be a built-in serde ("
                f"{', '.join(BUILTIN_SERDES)}) or registered with serializers.registry.{value}.class",
            )

    # -- building the model -----------------------------------------------------------------

    def serializers(self) -> dict[str, SerdeSpec]:
        result = {name: SerdeSpec(name, name) for name in BUILTIN_SERDES}
        for name, first_key in self.serdes.items():
            prefix = f"serializers.registry.{name}."
            class_key = prefix + "class"
            if class_key not in self.config:
                self.problem(
                    first_key,
                    f"'{class_key}' is required: serde '{name}' is configured at {self.at(first_key)} "
                    f"without a class ({catalogue.SERDE_CLASS.description})",
                )
                continue
            kind = self.parsed.get(class_key)
            if kind is None:
                continue
            schema = self.schema(prefix + "schema", kind, required=True)
            reader = self.schema(prefix + "reader.schema", kind, required=False)
            result[name] = SerdeSpec(name, kind, schema, reader)
        return result

    def schema(self, key: str, kind: str, *, required: bool) -> Path | None:
        if key not in self.config:
            if kind == "avro" and required:
                class_key = key.removesuffix("schema") + "class"
                self.problem(
                    class_key,
                    f"'{key}' is required for the avro serde set at {self.at(class_key)}: "
                    "the path of an Avro schema file (.avsc)",
                )
            return None
        if kind != "avro":
            self.invalid(key, f"unset: schemas are for avro serdes, and this serde is {kind}")
            return None
        if key not in self.parsed:
            return None
        path = self.config.resolve_path(self.parsed[key])
        if not path.is_file():
            self.invalid(key, f"an existing Avro schema file ('{path}' does not exist)")
            return None
        try:
            import fastavro.schema

            fastavro.schema.load_schema(str(path))
        except Exception as exc:  # noqa: BLE001 - any parse failure is a config problem
            cause = f" ({exc.__cause__})" if exc.__cause__ else ""
            self.invalid(key, f"a valid Avro schema ('{path}': {type(exc).__name__}: {exc}{cause})")
            return None
        return path

    def streams(self, system: str) -> dict[SystemStream, StreamConfig]:
        fields: dict[SystemStream, dict[str, Any]] = {}
        for key, stream_system, stream in self.stream_keys:
            ss = SystemStream(stream_system, stream)
            if not self.check_system(key, ss, system) or key not in self.parsed:
                continue
            suffix = key.removeprefix(f"systems.{stream_system}.streams.{stream}.")
            fields.setdefault(ss, {})[_STREAM_FIELDS[suffix]] = self.parsed[key]
        return {ss: StreamConfig(ss, **kwargs) for ss, kwargs in fields.items()}

    def changelog(self, key: str, system: str) -> SystemStream | None:
        raw = self.parsed[key]
        try:
            stream = SystemStream.parse(raw) if "." in raw else SystemStream(system, raw)
        except ValueError:
            self.invalid(key, "a stream name system.stream (e.g. kafka.my-store-changelog)")
            return None
        return stream if self.check_system(key, stream, system) else None

    def stores_config(self, system: str) -> dict[str, StoreConfig]:
        result: dict[str, StoreConfig] = {}
        owners: dict[SystemStream, str] = {}
        for name, first_key in self.stores.items():
            prefix = f"stores.{name}."
            if prefix + "factory" not in self.config:
                self.problem(
                    first_key,
                    f"'{prefix}factory' is required: store '{name}' is configured at {self.at(first_key)} "
                    f"without a factory ({catalogue.STORE_FACTORY.description})",
                )
                continue
            kwargs = {
                field: self.parsed[prefix + suffix]
                for suffix, field in _STORE_FIELDS.items()
                if prefix + suffix in self.parsed
            }
            if prefix + "changelog" in self.parsed:
                changelog = self.changelog(prefix + "changelog", system)
                if changelog in owners:
                    self.problem(
                        prefix + "changelog",
                        f"Changelog '{changelog}' of store '{name}' ({self.at(prefix + 'changelog')}) "
                        f"is also the changelog of store '{owners[changelog]}': each store needs its own",
                    )
                elif changelog is not None:
                    owners[changelog] = name
                kwargs["changelog"] = changelog
            self.check_side_inputs(name, system)
            if "engine" in kwargs:
                result[name] = StoreConfig(name, **kwargs)
        return result

    def check_side_inputs(self, name: str, system: str) -> None:
        """A side-input store has no changelog of its own and reads no task input; its
        processor and scope keys need ``side.inputs`` (docs/side-inputs.md)."""
        prefix = f"stores.{name}."
        side = prefix + "side.inputs"
        if side not in self.config:
            for suffix in ("side.inputs.processor.factory", "side.inputs.scope"):
                if prefix + suffix in self.config:
                    self.problem(
                        prefix + suffix,
                        f"'{prefix + suffix}' ({self.at(prefix + suffix)}) is set but '{side}' is not: "
                        f"set '{side}' to the topics that fill store '{name}', or remove it",
                    )
            return
        if prefix + "changelog" in self.config:
            self.problem(
                prefix + "changelog",
                f"Store '{name}' has both '{side}' ({self.at(side)}) and '{prefix}changelog' "
                f"({self.at(prefix + 'changelog')}): a side-input store is restored from its side-input "
                "topics, which are its changelog; remove one of the two keys",
            )
        inputs = set(_as_tuple(self.parsed.get("task.inputs")))
        for stream in _as_tuple(self.parsed.get(side)):
            if not self.check_system(side, stream, system):
                continue
            if stream in inputs:
                self.problem(
                    side,
                    f"Stream '{stream}' is a side input of store '{name}' ({self.at(side)}) and also in "
                    f"'task.inputs' ({self.at('task.inputs')}): a stream is either processed by the task or "
                    "fills a store; remove it from one of the two keys",
                )

    def check_standbys(self) -> None:
        key = "job.standbytasks.replication.factor"
        factor, containers = self.parsed.get(key), self.parsed.get("job.container.count", 1)
        if factor is not None and factor > containers:
            self.invalid(
                key,
                f"<= job.container.count ({containers}): each copy of a task's stores lives on another "
                "container",
            )

    def servers(self, system: str) -> tuple[str, str]:
        consumer = self.parsed.get(f"systems.{system}.consumer.bootstrap.servers")
        producer = self.parsed.get(f"systems.{system}.producer.bootstrap.servers")
        return consumer or producer or _DEFAULT_SERVERS, producer or consumer or _DEFAULT_SERVERS

    def overrides(self, system: str, role: str) -> dict[str, str]:
        return {
            parts["rest"].replace(".", "_"): self.config[key].strip()
            for key, parts in self.passthrough
            if parts.get("system") == system and key.startswith(f"systems.{system}.{role}.")
        }

    def parse(self, check_task_class: bool) -> JobConfig:
        self.classify()
        self.check_required()
        system = self.resolve_system()
        for key in ("task.inputs", "task.dead.letter.stream"):
            for stream in _as_tuple(self.parsed.get(key)):
                self.check_system(key, stream, system)
        serializers = self.serializers()
        self.check_serde_refs(serializers)
        streams, stores = self.streams(system), self.stores_config(system)
        self.check_standbys()
        if check_task_class and "task.class" in self.parsed:
            self.check_task_class()
        if self.problems:
            raise config_error(self.config.source, [m for _, m in sorted(self.problems, key=lambda p: p[0])])
        consumer, producer = self.servers(system)
        kwargs = {field: self.parsed[key] for key, field in _JOB_FIELDS.items() if key in self.parsed}
        kwargs |= {
            field: self.parsed[f"systems.{system}.{suffix}"]
            for suffix, field in _SYSTEM_FIELDS.items()
            if f"systems.{system}.{suffix}" in self.parsed
        }
        if "job.logged.store.base.dir" in self.parsed:
            kwargs["logged_store_base_dir"] = Path(self.parsed["job.logged.store.base.dir"]).expanduser()
        return JobConfig(
            **kwargs,
            default_system=system,
            consumer_bootstrap_servers=consumer,
            producer_bootstrap_servers=producer,
            streams=streams,
            serializers=serializers,
            stores=stores,
            consumer_overrides=self.overrides(system, "consumer"),
            producer_overrides=self.overrides(system, "producer"),
        )

    def check_task_class(self) -> None:
        from samzapy.config.task_class import resolve_task_class

        try:
            resolve_task_class(self.parsed["task.class"], self.at("task.class"))
        except ConfigError as exc:
            for message in getattr(exc, "problems", [str(exc)]):
                self.problem("task.class", message)


def _as_tuple(value: SystemStream | tuple[SystemStream, ...] | None) -> tuple[SystemStream, ...]:
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)

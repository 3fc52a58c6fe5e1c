"""From raw properties to a validated :class:`JobConfig`, every problem reported at once.

:func:`parse_job_config` is the one place configuration is checked. It parses every key under
samzapy's reserved prefixes by its catalogue type (:mod:`samzapy.config.keys`), then checks
the rules across keys (serdes, systems and streams here; stores in :mod:`.stores`; metrics
reporters in :mod:`.reporters`), optionally imports the user code the job names
(:mod:`.user_code`), and raises one :class:`ConfigError` listing all problems, each with the
key, its value, its file and line, and what is accepted. Nothing touches a broker.

Which field each key sets, and its default, come from the catalogue and the model: this
module names only the keys its rules are about.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from samzapy.config import keys as catalogue
from samzapy.config.app import application_view
from samzapy.config.clients import check_client_settings
from samzapy.config.model import JobConfig, SerdeSpec, StreamConfig
from samzapy.config.properties import Config
from samzapy.config.reporters import reporter_specs
from samzapy.config.stores import check_system, store_configs
from samzapy.config.types import BUILTIN_SERDES, SERDE_CLASS, SERDE_REF
from samzapy.config.user_code import resolve_serde_factory, resolve_task_class
from samzapy.config.validation import Validation
from samzapy.errors import ConfigError
from samzapy.streams import SystemStream
from samzapy.task import StreamTask


def parse_job_config(config: Config, *, check_task_class: bool = False) -> JobConfig:
    """Validate ``config`` and build the job's :class:`JobConfig`.

    Args:
        config: the raw configuration (:func:`samzapy.config.load_config`).
        check_task_class: also import the user code the job names (``task.class`` and each
            ``stores.<store>.side.inputs.processor.factory``), report import problems among
            the others, and keep what was imported on the result (``job.task_type``,
            ``store.processor``), so that a run imports it once. Off by default: importing
            runs user code.

    Raises:
        ConfigError: listing every problem found (``error.problems``), one line each.
    """
    check = Validation(config)
    check.classify()
    _check_required(check)
    system = _resolve_system(check)
    inputs: tuple[SystemStream, ...] = check.parsed.get("task.inputs", ())
    for stream in inputs:
        check_system(check, "task.inputs", stream, system)
    if "task.dead.letter.stream" in check.parsed:
        check_system(check, "task.dead.letter.stream", check.parsed["task.dead.letter.stream"], system)
    serializers = _serializers(check, import_code=check_task_class)
    _check_serde_refs(check, serializers)
    streams = _streams(check, system)
    stores = store_configs(check, system, inputs, import_code=check_task_class)
    reporters = reporter_specs(check, system)
    check_client_settings(check)
    _check_standbys(check)
    _check_group_mode(check)
    task_type = _task_type(check) if check_task_class and "task.class" in check.parsed else None
    check.raise_problems()
    fields = check.fields("job") | check.fields("system", system)
    consumer = fields.get("consumer_bootstrap_servers") or fields.get("producer_bootstrap_servers")
    producer = fields.get("producer_bootstrap_servers") or consumer
    if consumer is not None:  # one of the two given: the other takes its value
        fields |= {"consumer_bootstrap_servers": consumer, "producer_bootstrap_servers": producer}
    return JobConfig(
        **fields,
        default_system=system,
        streams=streams,
        serializers=serializers,
        stores=stores,
        consumer_overrides=_overrides(check, system, "consumer"),
        producer_overrides=_overrides(check, system, "producer"),
        reporters=reporters,
        app_config=application_view(config.entries(), config.source),
        imported_task_class=task_type,
    )


def _check_required(check: Validation) -> None:
    for spec in catalogue.KEYS:
        if spec.required and spec.pattern not in check.config:
            check.problem(None, f"'{spec.pattern}' is required ({check.config.source}): {spec.meaning}")


def _resolve_system(check: Validation) -> str:
    """The job's one system: the one ``systems.<system>.*`` keys name, else ``kafka``."""
    named = check.names("system")
    configured = sorted(named) or ["kafka"]
    if len(configured) > 1:
        where = ", ".join(f"'{s}' ({check.at(named[s])})" for s in configured)
        check.problem(
            named[configured[1]],
            f"Several systems are configured: {where}; samzapy runs a job on one Kafka system: "
            "use one system name throughout",
        )
    name = check.parsed.get("job.default.system")
    if name is not None and name not in configured:
        check.invalid("job.default.system", "a configured system (" + ", ".join(configured) + ")")
    return name if name in configured else configured[0]


def _check_serde_refs(check: Validation, registered: dict[str, SerdeSpec]) -> None:
    # A serde whose class is wrong is reported once, at its class key, not at every use.
    named = set(registered) | set(check.names("serde"))
    for key, value in check.parsed.items():
        found = catalogue.find_spec(key)
        if found is None or found[0].type is not SERDE_REF or value in named:
            continue
        hint = difflib.get_close_matches(value, list(registered), n=1)
        tail = f"did you mean '{hint[0]}'? " if hint else ""
        check.problem(
            key,
            f"Unknown serde '{value}' for '{key}' ({check.at(key)}): {tail}must be a built-in serde ("
            f"{', '.join(BUILTIN_SERDES)}) or registered with serializers.registry.{value}.class",
        )


def _serializers(check: Validation, *, import_code: bool) -> dict[str, SerdeSpec]:
    result = {name: SerdeSpec(name, name) for name in BUILTIN_SERDES}
    for name, first_key in check.names("serde").items():
        prefix = f"serializers.registry.{name}."
        class_key = prefix + "class"
        if class_key not in check.config:
            check.problem(
                first_key,
                f"'{class_key}' is required: serde '{name}' is configured at {check.at(first_key)} "
                f"without a class ({SERDE_CLASS.description})",
            )
            continue
        kind = check.parsed.get(class_key)
        if kind is None:
            continue
        schema = _schema(check, prefix + "schema", kind, required=True)
        reader = _schema(check, prefix + "reader.schema", kind, required=False)
        spec = SerdeSpec(name, kind, schema, reader)
        if spec.custom and import_code:
            spec = SerdeSpec(name, kind, factory=_serde_factory(check, class_key, kind))
        result[name] = spec
    return result


def _serde_factory(check: Validation, key: str, spec: str) -> object | None:
    try:
        return resolve_serde_factory(spec, key, check.at(key))
    except ConfigError as exc:
        for message in getattr(exc, "problems", [str(exc)]):
            check.problem(key, message)
        return None


def _schema(check: Validation, key: str, kind: str, *, required: bool) -> Path | None:
    if key not in check.config:
        if kind == "avro" and required:
            class_key = key.removesuffix("schema") + "class"
            check.problem(
                class_key,
                f"'{key}' is required for the avro serde set at {check.at(class_key)}: "
                "the path of an Avro schema file (.avsc)",
            )
        return None
    if kind != "avro":
        check.invalid(key, f"unset: schemas are for avro serdes, and this serde is {kind}")
        return None
    if key not in check.parsed:
        return None
    path = check.config.resolve_path(check.parsed[key])
    if not path.is_file():
        check.invalid(key, f"an existing Avro schema file ('{path}' does not exist)")
        return None
    try:
        import fastavro.schema

        fastavro.schema.load_schema(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure is a config problem
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        check.invalid(key, f"a valid Avro schema ('{path}': {type(exc).__name__}: {exc}{cause})")
        return None
    return path


def _streams(check: Validation, system: str) -> dict[SystemStream, StreamConfig]:
    result: dict[SystemStream, StreamConfig] = {}
    for key, stream_system, stream in check.stream_keys:
        ss = SystemStream(stream_system, stream)
        if check_system(check, key, ss, system) and ss not in result:
            result[ss] = StreamConfig(ss, **check.fields("stream", stream_system, stream))
    return result


def _check_standbys(check: Validation) -> None:
    key = "job.standbytasks.replication.factor"
    factor, containers = check.parsed.get(key), check.parsed.get("job.container.count", 1)
    if check.parsed.get("job.coordinator.factory", "passthrough") == "group":
        return  # the group's leader places at most one copy per member (fewer in a small group)
    if factor is not None and factor > containers:
        check.invalid(
            key,
            f"<= job.container.count ({containers}): each copy of a task's stores lives on another container",
        )


def _check_group_mode(check: Validation) -> None:
    """What group mode does not run.

    The Spark restore engine, which restores a container's stores once, at start, where group
    mode restores each task when it arrives, on a thread of its own while the member's other
    tasks run (``container/task_manager.py``).
    """
    if check.parsed.get("job.coordinator.factory", "passthrough") != "group":
        return
    for key, value in check.parsed.items():
        if key.startswith("stores.") and key.endswith(".restore.engine") and value == "spark":
            check.problem(
                key,
                f"Invalid value 'spark' for '{key}' ({check.at(key)}): job.coordinator.factory=group "
                "restores each task when it arrives, while the member's other tasks run; the Spark "
                "restore engine restores a container's stores once, at start. Use restore.engine="
                "sequential with group mode, or job.coordinator.factory=passthrough",
            )


def _overrides(check: Validation, system: str, role: str) -> dict[str, str]:
    return {
        parts["rest"].replace(".", "_"): check.config[key].strip()
        for key, parts in check.passthrough
        if parts.get("system") == system and key.startswith(f"systems.{system}.{role}.")
    }


def _task_type(check: Validation) -> type[StreamTask] | None:
    try:
        return resolve_task_class(check.parsed["task.class"], check.at("task.class"))
    except ConfigError as exc:
        for message in getattr(exc, "problems", [str(exc)]):
            check.problem("task.class", message)
        return None

"""Samza-style reporter configuration: ``metrics.reporters`` and ``metrics.reporter.<name>.*``.

Single keys are validated with the rest of the job (:mod:`samzapy.config.keys`); this module
checks what spans keys (a listed reporter has a kind, a snapshot reporter has a stream on the
job's system, two HTTP reporters do not share a port) and resolves each reporter into a
:class:`ReporterSpec`. Like every config check it runs before any broker connection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from samzapy.config import Config, JobConfig
from samzapy.config import keys as catalogue
from samzapy.config.properties import config_error
from samzapy.streams import SystemStream

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 60
DEFAULT_PORT = 9404
DEFAULT_HOST = "0.0.0.0"
#: Reporter kinds samzapy runs (``jmx`` is accepted in config and skipped).
KINDS = ("snapshot", "prometheus", "log")


@dataclass(frozen=True)
class ReporterSpec:
    """One configured reporter, resolved.

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
    interval_s: int = DEFAULT_INTERVAL_S
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT


def reporter_specs(config: Config, job: JobConfig) -> list[ReporterSpec]:
    """The reporters ``config`` asks for, in the order of ``metrics.reporters``.

    Raises:
        ConfigError: listing every problem (a reporter without a kind, a snapshot reporter
            without a stream, a stream on another system, a port used twice, a bad value).
    """
    problems: list[str] = _unknown_reporter_keys(config)
    names = _value(config, "metrics.reporters", problems) or ()
    _warn_unlisted(config, set(names))
    specs: list[ReporterSpec] = []
    for name in names:
        spec = _reporter(config, job, name, problems)
        if spec is not None:
            specs.append(spec)
    ports: dict[int, str] = {}
    for spec in specs:
        if spec.kind == "prometheus" and spec.port != 0:
            if spec.port in ports:
                problems.append(
                    f"Reporters '{ports[spec.port]}' and '{spec.name}' both listen on port {spec.port}: "
                    f"give each its own metrics.reporter.<name>.port"
                )
            ports[spec.port] = spec.name
    if problems:
        raise config_error(config.source, problems)
    return specs


def _reporter(config: Config, job: JobConfig, name: str, problems: list[str]) -> ReporterSpec | None:
    prefix = f"metrics.reporter.{name}."
    kind = _value(config, prefix + "class", problems)
    if kind is None and prefix + "class" not in config:
        if name not in KINDS:
            problems.append(
                f"'{prefix}class' is required: reporter '{name}' is listed in metrics.reporters "
                f"({config.location('metrics.reporters')}) without a class "
                f"({catalogue.REPORTER_CLASS.description})"
            )
            return None
        kind = name
    if kind is None:
        return None
    if kind == "jmx":
        log.warning(
            "metrics reporter '%s' is Samza's JMX reporter, which has no Python counterpart: skipped",
            name,
        )
        return None
    interval = _value(config, prefix + "interval.seconds", problems)
    if interval is None:
        interval = _value(config, prefix + "interval", problems)
    stream = _value(config, prefix + "stream", problems)
    if kind == "snapshot":
        if stream is None and prefix + "stream" not in config:
            problems.append(
                f"'{prefix}stream' is required for the snapshot reporter '{name}': the stream its "
                f"JSON snapshots go to, e.g. {prefix}stream={job.default_system}.metrics"
            )
        elif stream is not None and stream.system != job.default_system:
            problems.append(
                f"Stream '{stream}' in '{prefix}stream' ({config.location(prefix + 'stream')}) is on system "
                f"'{stream.system}', which is not configured: must be on '{job.default_system}'"
            )
    port = _value(config, prefix + "port", problems)
    host = _value(config, prefix + "host", problems)
    return ReporterSpec(
        name=name,
        kind=kind,
        stream=stream,
        interval_s=DEFAULT_INTERVAL_S if interval is None else interval,
        host=host or DEFAULT_HOST,
        port=DEFAULT_PORT if port is None else port,
    )


def _value(config: Config, key: str, problems: list[str]):  # noqa: ANN202 - the key's parsed type
    """The parsed value of ``key`` by its catalogue type; ``None`` when unset or invalid."""
    if key not in config:
        return None
    spec, _ = catalogue.find_spec(key)
    try:
        return spec.type.parse(config[key])
    except ValueError:
        problems.append(
            f"Invalid value '{config[key]}' for '{key}' ({config.location(key)}): "
            f"must be {spec.type.description}"
        )
        return None


def _unknown_reporter_keys(config: Config) -> list[str]:
    """``metrics.*`` is an open namespace (Samza has more metrics keys), but a key under
    ``metrics.reporter.`` that no reporter reads is a typo: report it with a suggestion."""
    problems = []
    for key in config:
        if key.startswith("metrics.reporter.") and catalogue.find_spec(key)[0].passthrough:
            hint = catalogue.suggest(key)
            tail = f"did you mean '{hint}'?" if hint else "see docs/configuration.md for the reporter keys"
            problems.append(f"Unknown key '{key}' ({config.location(key)}): {tail}")
    return problems


def _warn_unlisted(config: Config, listed: set[str]) -> None:
    unlisted = sorted(
        {
            key.split(".")[2]
            for key in config
            if key.startswith("metrics.reporter.") and key.split(".")[2] not in listed
        }
    )
    for name in unlisted:
        log.warning(
            "metrics.reporter.%s.* is configured but '%s' is not in metrics.reporters: not started",
            name,
            name,
        )

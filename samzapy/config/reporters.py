"""The metrics reporters of a job (``metrics.reporters``, ``metrics.reporter.<name>.*``).

Single keys are checked by their catalogue types with the rest of the job; this module checks
what spans keys, with the rest of the configuration and before anything connects: a listed
reporter has a kind (its ``class``, or a name that is a kind), a snapshot reporter has a
stream on the job's system, and two HTTP reporters do not share a port. It resolves each
listed reporter into a :class:`~samzapy.config.model.ReporterSpec`.
"""

from __future__ import annotations

import logging

from samzapy.config.model import ReporterSpec
from samzapy.config.stores import check_system
from samzapy.config.types import REPORTER_CLASS
from samzapy.config.validation import Validation

log = logging.getLogger(__name__)

#: Reporter kinds samzapy runs (``jmx`` is accepted in config and skipped).
KINDS = ("snapshot", "prometheus", "log")


def reporter_specs(check: Validation, system: str) -> tuple[ReporterSpec, ...]:
    """The reporters ``metrics.reporters`` lists, in its order; problems go to ``check``."""
    names: tuple[str, ...] = check.parsed.get("metrics.reporters", ())
    _warn_unlisted(check, set(names))
    specs = [spec for name in names if (spec := _reporter(check, system, name)) is not None]
    ports: dict[int, str] = {}
    for spec in specs:
        if spec.kind == "prometheus" and spec.port != 0:
            if spec.port in ports:
                check.problem(
                    "metrics.reporters",
                    f"Reporters '{ports[spec.port]}' and '{spec.name}' both listen on port {spec.port}: "
                    "give each its own metrics.reporter.<name>.port",
                )
            ports[spec.port] = spec.name
    return tuple(specs)


def _reporter(check: Validation, system: str, name: str) -> ReporterSpec | None:
    prefix = f"metrics.reporter.{name}."
    fields = check.fields("reporter", name)
    if prefix + "class" not in check.config:
        if name not in KINDS:
            check.problem(
                "metrics.reporters",
                f"'{prefix}class' is required: reporter '{name}' is listed in metrics.reporters "
                f"({check.at('metrics.reporters')}) without a class ({REPORTER_CLASS.description})",
            )
            return None
        fields["kind"] = name
    if "kind" not in fields:  # an invalid class (already reported)
        return None
    spec = ReporterSpec(name, **fields)
    if spec.kind == "jmx":
        log.warning(
            "metrics reporter '%s' is Samza's JMX reporter, which has no Python counterpart: skipped", name
        )
        return None
    if spec.kind == "snapshot":
        _check_snapshot_stream(check, system, spec)
    return spec


def _check_snapshot_stream(check: Validation, system: str, spec: ReporterSpec) -> None:
    key = f"metrics.reporter.{spec.name}.stream"
    if key not in check.config:
        check.problem(
            "metrics.reporters",
            f"'{key}' is required for the snapshot reporter '{spec.name}': the stream its JSON "
            f"snapshots go to, e.g. {key}={system}.metrics",
        )
    elif spec.stream is not None:
        check_system(check, key, spec.stream, system)


def _warn_unlisted(check: Validation, listed: set[str]) -> None:
    for name in sorted(set(check.names("reporter")) - listed):
        log.warning(
            "metrics.reporter.%s.* is configured but '%s' is not in metrics.reporters: not started",
            name,
            name,
        )

"""One validation pass over a :class:`Config`: the state the job, store and reporter checks share.

:class:`Validation` parses every key under samzapy's reserved prefixes by its catalogue type
(:mod:`samzapy.config.keys`), files each parsed value under the instance it configures and
the model field it sets (both named by the key's :class:`~samzapy.config.keys.KeySpec`), and
collects problems with their line, so that :func:`samzapy.config.parse_job_config` can report
them all at once, in file order.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any

from samzapy.config import keys as catalogue
from samzapy.config.keys import KeySpec
from samzapy.config.properties import Config, config_error
from samzapy.config.types import IGNORED

log = logging.getLogger(__name__)


class Validation:
    """The parsed values and the problems of one configuration.

    Attributes:
        config: the raw configuration.
        parsed: concrete key -> parsed value, for every valid non-namespace key.
        values: ``(scope, *names)`` -> {model field: parsed value}; e.g.
            ``("store", "counts")`` -> ``{"object_cache_size": 10}``. The scopes are
            :attr:`KeySpec.scope`'s; the names are the key's variable parts, in order.
        first_keys: scope -> name -> the first key naming it (``"store"`` -> ``"counts"`` ->
            ``"stores.counts.factory"``), for messages about an instance as a whole.
        stream_keys: (key, system, stream) of every ``systems.<system>.streams.<stream>.*`` key.
        passthrough: (key, variable parts) of every key in a pass-through namespace.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self.parsed: dict[str, Any] = {}
        self.values: dict[tuple[str, ...], dict[str, Any]] = {}
        self.first_keys: dict[str, dict[str, str]] = {}
        self.stream_keys: list[tuple[str, str, str]] = []
        self.passthrough: list[tuple[str, dict[str, str]]] = []
        self._problems: list[tuple[int, str]] = []

    # -- problems ---------------------------------------------------------------------------

    def problem(self, key: str | None, message: str) -> None:
        """Record a problem; it sorts by the line ``key`` was set on (unset keys first)."""
        self._problems.append((self.config.line(key), message))

    def at(self, key: str) -> str:
        """Where ``key`` was set (``path:line``)."""
        return self.config.location(key)

    def invalid(self, key: str, expected: str) -> None:
        """Record "Invalid value 'v' for 'key' (path:line): must be <expected>"."""
        self.problem(
            key, f"Invalid value '{self.config[key]}' for '{key}' ({self.at(key)}): must be {expected}"
        )

    def raise_problems(self) -> None:
        """Raise one :class:`ConfigError` listing every problem in file order, if there are any."""
        if self._problems:
            ordered = sorted(self._problems, key=lambda p: p[0])
            raise config_error(self.config.source, [message for _, message in ordered])

    # -- pass 1: every key on its own -------------------------------------------------------

    def classify(self) -> None:
        """Parse every reserved key by its catalogue type; unknown keys are problems."""
        for key in self.config:
            if catalogue.is_reserved(key):
                self._classify(key)
            else:
                self._near_reserved(key)

    def _near_reserved(self, key: str) -> None:
        """Report an application key that is a reserved key with a misspelt prefix.

        Its first word is a misspelt reserved prefix (``store.``, ``system.``, ...) and, spelt
        right, it is a key samzapy reads: a typo that would otherwise be silently kept as an
        application key (a store without its changelog, say).
        """
        first, dot, rest = key.partition(".")
        if not dot:
            return
        prefixes = [p.rstrip(".") for p in catalogue.RESERVED_PREFIXES]
        close = difflib.get_close_matches(first.lower(), prefixes, n=1, cutoff=0.75)
        if not close:
            return
        meant = f"{close[0]}.{rest}"
        found = catalogue.find_spec(meant)
        # Only a key samzapy reads by name: "metric.name" may well be the application's own.
        if found is not None and not found[0].passthrough:
            self.problem(
                key,
                f"Unknown key '{key}' ({self.at(key)}): did you mean '{meant}'? ('{first}.' is not one of "
                f"samzapy's prefixes, so the key would be kept as an application key and ignored)",
            )

    def _classify(self, key: str) -> None:
        found = catalogue.find_spec(key)
        if found is None or (found[0].passthrough and key.startswith("metrics.reporter.")):
            # metrics.* is open (Samza has more metrics keys), but a key under
            # metrics.reporter. that no reporter reads is a typo
            self._unknown(key)
            return
        spec, parts = found
        self._note_names(key, spec, parts)
        if spec.type is IGNORED:
            log.warning("%s (%s) is a Samza setting samzapy does not use: ignored", key, self.at(key))
        elif spec.passthrough:
            self.passthrough.append((key, parts))
        else:
            try:
                value = spec.type.parse(self.config[key])
            except ValueError:
                self.invalid(key, spec.type.description)
                return
            self.parsed[key] = value
            self._file(spec, parts, value)

    def _unknown(self, key: str) -> None:
        if key.startswith("blob.store.") and any(w in key for w in ("secret", "access", "password", "token")):
            self.problem(
                key,
                f"Unknown key '{key}' ({self.at(key)}): blob store credentials are never read from the "
                "job file; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, "
                "~/.aws/credentials, an instance or pod role) where the job runs",
            )
            return
        hint = catalogue.suggest(key)
        if hint:
            tail = f"did you mean '{hint}'?"
        elif key.startswith("metrics.reporter."):
            tail = "see docs/configuration.md for the reporter keys"
        else:
            tail = (
                "not a samzapy setting (see docs/configuration.md; application keys must not "
                "start with " + ", ".join(catalogue.RESERVED_PREFIXES) + ")"
            )
        self.problem(key, f"Unknown key '{key}' ({self.at(key)}): {tail}")

    def _note_names(self, key: str, spec: KeySpec, parts: dict[str, str]) -> None:
        if "stream" in parts:
            self.stream_keys.append((key, parts["system"], parts["stream"]))
        elif "system" in parts:
            self.first_keys.setdefault("system", {}).setdefault(parts["system"], key)
        for scope in ("store", "serde", "reporter"):
            if scope in parts:
                self.first_keys.setdefault(scope, {}).setdefault(parts[scope], key)

    def _file(self, spec: KeySpec, parts: dict[str, str], value: Any) -> None:
        """File ``value`` under its instance and field; an alias never overrides its key."""
        if spec.field is None:
            return
        fields = self.values.setdefault((spec.scope, *parts.values()), {})
        if spec.alias_of is None:
            fields[spec.field] = value
        else:
            fields.setdefault(spec.field, value)

    # -- reading ----------------------------------------------------------------------------

    def fields(self, scope: str, *names: str) -> dict[str, Any]:
        """The parsed field values of one instance (a copy; empty when nothing is set)."""
        return dict(self.values.get((scope, *names), {}))

    def names(self, scope: str) -> dict[str, str]:
        """The configured names of ``scope`` (``store``, ``serde``, ...) -> their first key."""
        return self.first_keys.get(scope, {})

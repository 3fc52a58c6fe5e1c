"""A pipeline's serde names, each checked once, at the line where the user wrote it.

A serde named on a stage is inherited by the stages after it: ``app.stream("v",
value="jsno").filter(...).to("out")`` sets ``jsno`` for the topic ``v`` and for ``out``. The
job configuration's check (:func:`samzapy.config.parse_job_config`) looks at every key, so it
would report the one typo once per key, the second time at the ``to()`` that merely inherited
it. This check runs first: each unknown name is reported once, at its first key in the
compiled configuration (the plan's keys come in stage order, so that is the stage that
named it), and the run stops there (exit 2), before anything connects.
"""

from __future__ import annotations

import difflib

from samzapy.config import keys as catalogue
from samzapy.config.properties import Config, config_error
from samzapy.config.types import BUILTIN_SERDES, SERDE_REF

_REGISTRY = "serializers.registry."


def check_serde_names(config: Config) -> None:
    """Refuse serde names that are neither built in nor registered in ``config``.

    Registered: any ``serializers.registry.<name>.*`` key (the class itself is checked by the
    job configuration's check, once, at its own key).

    Raises:
        ConfigError: one problem per unknown name, located where it is first used.
    """
    registered = set(BUILTIN_SERDES)
    registered |= {key[len(_REGISTRY) :].split(".", 1)[0] for key in config if key.startswith(_REGISTRY)}
    first: dict[str, str] = {}  # unknown name -> its first key
    for entry in config.entries():
        found = catalogue.find_spec(entry.key)
        if found is None or found[0].type is not SERDE_REF or entry.value in registered:
            continue
        first.setdefault(entry.value, entry.key)
    if not first:
        return
    problems = []
    for name, key in first.items():
        hint = difflib.get_close_matches(name, sorted(registered), n=1)
        tail = f"did you mean '{hint[0]}'? " if hint else ""
        problems.append(
            f"Unknown serde '{name}' at {config.location(key)} (for '{key}' and the stages that "
            f"inherit it): {tail}must be a built-in serde ({', '.join(BUILTIN_SERDES)}) or "
            f"registered with serializers.registry.{name}.class"
        )
    raise config_error(config.source, problems)

"""The pass-through client keys (``systems.<system>.consumer.*``, ``.producer.*``), checked.

They are checked against the settings kafka-python's clients accept, at config time, with
file:line.

A key is written Kafka's way (``max.poll.records``) or kafka-python's (``max_poll_records``);
both name the kafka-python setting with dots as underscores. An unknown one is a problem with
the closest setting, instead of a ``TypeError`` from the client when it connects.
"""

from __future__ import annotations

import difflib

from samzapy.config.validation import Validation

_CLIENTS = {"consumer": "KafkaConsumer", "producer": "KafkaProducer"}


def accepted_settings(role: str) -> frozenset[str]:
    """The setting names kafka-python's client for ``role`` (consumer, producer) accepts."""
    from samzapy.kafka.consumer import accepted_settings as client_accepts

    return client_accepts(role)


def check_client_settings(check: Validation) -> None:
    """Record a problem for every pass-through client key the client would refuse."""
    for key, parts in check.passthrough:
        role = next((r for r in _CLIENTS if key.startswith(f"systems.{parts.get('system')}.{r}.")), None)
        if role is None:
            continue
        setting = parts["rest"].replace(".", "_")
        accepted = accepted_settings(role)
        if setting in accepted:
            continue
        close = difflib.get_close_matches(setting, sorted(accepted), n=1, cutoff=0.7)
        hint = f"did you mean '{key[: -len(parts['rest'])]}{close[0].replace('_', '.')}'? " if close else ""
        check.problem(
            key,
            f"Unknown key '{key}' ({check.at(key)}): {hint}'{parts['rest']}' is not a setting of "
            f"kafka-python's {_CLIENTS[role]} (its settings, dots for underscores: "
            f"https://kafka-python.readthedocs.io/en/master/apidoc/{_CLIENTS[role]}.html)",
        )

"""kafka-python settings from config strings (``systems.kafka.consumer.max.poll.records=500``)."""

from __future__ import annotations

from typing import Any


def coerce_setting(value: str) -> Any:
    """Turn a config string into the int, float, bool or str kafka-python expects.

    >>> coerce_setting("500"), coerce_setting("0.5"), coerce_setting("true"), coerce_setting("lz4")
    (500, 0.5, True, 'lz4')
    """
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def client_settings(overrides: dict[str, str]) -> dict[str, Any]:
    """Every override coerced with :func:`coerce_setting`, keys unchanged."""
    return {key: coerce_setting(value) for key, value in overrides.items()}

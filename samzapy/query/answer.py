"""What the query service answers with, and the parsing of request parameters."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from samzapy.query.formats import QueryError


@dataclass
class Answer:
    """An HTTP answer: status and JSON body."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The body as JSON bytes."""
        return json.dumps(self.body, default=str).encode()


def flag_param(params: dict[str, str], name: str) -> bool:
    """The boolean parameter ``name`` (absent: false; present without a value: true).

    >>> flag_param({"allow_stale": "true"}, "allow_stale"), flag_param({}, "allow_stale")
    (True, False)
    """
    value = params.get(name, "false").lower()
    if value not in ("true", "false", "1", "0", ""):
        msg = f"{name}={params[name]} is not a boolean: use true or false"
        raise QueryError(msg)
    return value in ("true", "1", "")


def int_param(params: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    """The integer parameter ``name`` within ``[low, high]`` (``default`` when absent).

    Raises:
        QueryError: (400) not an integer, or out of range.
    """
    raw = params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        msg = f"{name}={raw} must be an integer from {low} to {high}"
        raise QueryError(msg)
    return value

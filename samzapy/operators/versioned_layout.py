r"""The state layout of a versioned table store.

How a :class:`~samzapy.stores.versioned.VersionedStore` (the table of the event-time
stream-table join) reads as data: a layout of :mod:`samzapy.operators.state_layout` over the
store's own encoding (:data:`~samzapy.stores.versioned.VERSION_TAG`,
:data:`~samzapy.stores.versioned.TIME_TAG`).

``kind='version'`` rows: ``key``, ``valid_from``, ``valid_to`` (the next version's
``valid_from``; null for the latest), ``deleted`` and ``value``; ``kind='observed_time'``
(``time``: the largest timestamp put). Versions move by their key; the observed time is a
progress, combined by a reshard as a watermark is (``min``).

>>> from samzapy.operators.key_encoding import encode_ms, escape
>>> key = VERSION_TAG + escape(b"k") + encode_ms(10)
>>> later = VERSION_TAG + escape(b"k") + encode_ms(20)
>>> row = VersionedLayout().decode(key, b"\x01" + b'"v1"', following=later)
>>> row["value_json"]
'{"valid_from":10,"valid_to":20,"deleted":false,"value":"v1"}'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samzapy.operators.key_encoding import decode_ms, unescape
from samzapy.operators.state_layout import MIN, record_row, unknown_row
from samzapy.store_codec import json_or_bytes, readable
from samzapy.stores.versioned import TIME_TAG, VERSION_TAG


@dataclass(frozen=True)
class VersionedLayout:
    """A versioned store with ``namespace`` (module doc).

    Keys are the bytes the task passed (their partition key: a task passes its message keys'
    bytes); values the JSON the store encodes by default.
    """

    namespace: bytes = b""

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is a version or the observed time."""
        return key.startswith(self.namespace + VERSION_TAG) or key == self.namespace + TIME_TAG

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one version (its end from ``following``, the next version of the key)."""
        prefix = self.namespace + VERSION_TAG
        if key == self.namespace + TIME_TAG:
            return record_row("observed_time", None, {"time": decode_ms(value)})
        if not key.startswith(prefix):
            return unknown_row(key, value)
        user, offset = unescape(key, len(prefix))
        deleted = value == b"\x00"
        body = {
            "valid_from": decode_ms(key, offset),
            "valid_to": _next_version_from(key[:offset], following),
            "deleted": deleted,
            "value": None if deleted else json_or_bytes(value[1:]),
        }
        return record_row("version", readable(user), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """A version's key; ``None`` for the observed time."""
        prefix = self.namespace + VERSION_TAG
        return unescape(key, len(prefix))[0] if key.startswith(prefix) else None

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """``min`` for the observed time (a progress, as a watermark is)."""
        return MIN if key == self.namespace + TIME_TAG else None


def _next_version_from(key_prefix: bytes, following: bytes | None) -> int | None:
    """The time of ``following`` if it is the next version of the same key.

    The time of ``following`` when it is the next version of the same key (its prefix, then 8
    bytes of time), else ``None``.
    """
    if following is None or len(following) != len(key_prefix) + 8 or not following.startswith(key_prefix):
        return None
    return decode_ms(following, len(key_prefix))

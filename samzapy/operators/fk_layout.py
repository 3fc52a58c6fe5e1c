"""The subscription store of :class:`~samzapy.operators.fk_join.ForeignKeyRight`.

Its encoding and how it reads as data (a layout of :mod:`samzapy.operators.state_layout`).

``namespace + SUBSCRIPTION_TAG + escape(foreign key) + left key`` -> ``version`` (8 bytes).
:class:`ForeignKeySubscriptionLayout` shows them as ``kind='subscription'`` rows, ``key`` the
foreign key, ``left_key`` and ``version``; they move by the foreign key.

>>> from samzapy.operators.key_encoding import encode_u64, escape
>>> row = ForeignKeySubscriptionLayout().decode(SUBSCRIPTION_TAG + escape(b"c-1") + b"o-9", encode_u64(3))
>>> row["key_json"], row["value_json"]
('"c-1"', '{"left_key":"o-9","version":3}')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samzapy.operators.key_encoding import decode_u64, unescape
from samzapy.operators.state_layout import decode_with, record_row, unknown_row
from samzapy.serdes import Serde, StringSerde

SUBSCRIPTION_TAG = b"\x00fk"


@dataclass(frozen=True)
class ForeignKeySubscriptionLayout:
    """The subscription store with ``namespace`` (module doc).

    ``key_serde`` and ``foreign_key_serde`` are the join's (default: string); the foreign key's
    bytes are its partition key, as the subscription topic is keyed by them.

    ``reshard_refusal``: why the job's state must not be resharded (a reshard stops with it
    before changing anything); ``None``: it may be.
    """

    namespace: bytes = b""
    key_serde: Serde | None = None
    foreign_key_serde: Serde | None = None
    reshard_refusal: str | None = None

    def claims(self, key: bytes) -> bool:
        """Whether ``key`` is a subscription."""
        return key.startswith(self.namespace + SUBSCRIPTION_TAG)

    def decode(self, key: bytes, value: bytes, following: bytes | None = None) -> dict[str, Any]:
        """The row of one subscription."""
        if not self.claims(key):
            return unknown_row(key, value)
        foreign, offset = unescape(key, len(self.namespace + SUBSCRIPTION_TAG))
        fk_serde, key_serde = self.foreign_key_serde or StringSerde(), self.key_serde or StringSerde()
        body = {"left_key": decode_with(key_serde, key[offset:]), "version": decode_u64(value)}
        return record_row("subscription", decode_with(fk_serde, foreign), body)

    def partition_key(self, key: bytes, value: bytes) -> bytes | None:
        """The foreign key's bytes."""
        if not self.claims(key):
            return None
        return unescape(key, len(self.namespace + SUBSCRIPTION_TAG))[0]

    def merge_rule(self, key: bytes, value: bytes) -> str | None:
        """None: subscriptions move by key; anything else is unknown."""
        return None

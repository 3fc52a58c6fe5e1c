"""Turning a fetched Kafka record into the envelope a task sees."""

from __future__ import annotations

from samzapy.records import Record
from samzapy.serdes import Serde
from samzapy.streams import SystemStreamPartition
from samzapy.task import IncomingMessageEnvelope


def envelope_of(
    ssp: SystemStreamPartition, record: Record, key_serde: Serde | None, msg_serde: Serde | None
) -> IncomingMessageEnvelope:
    """The envelope of ``record`` with key and message deserialised.

    A ``None`` serde or a ``None`` key/value is passed through as it is.

    Raises:
        Exception: whatever the serde raises for bytes it cannot read; callers turn it into
            their error policy.
    """
    key = record.key if key_serde is None or record.key is None else key_serde.from_bytes(record.key)
    value = record.value if msg_serde is None or record.value is None else msg_serde.from_bytes(record.value)
    size = (record.serialized_key_size or 0) + (record.serialized_value_size or 0)
    return IncomingMessageEnvelope(
        ssp, record.offset, key, value, record.timestamp, size, record.headers or []
    )

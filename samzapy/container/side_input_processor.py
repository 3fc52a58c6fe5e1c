"""Side-input processors: how the records of a side-input topic become store writes.

Samza's ``SideInputsProcessor``.

``stores.S.side.inputs.processor.factory=module:Name`` names either a function
``process(envelope, store) -> iterable of (key, value)`` or a class whose instances (built
without arguments) have such a ``process`` method; the configuration layer imports it
(:func:`samzapy.config.user_code.resolve_processor`). The envelope is deserialised with the
side-input stream's serdes; the returned keys and values are written with the store's
serdes; a ``None`` value deletes the key. ``store`` is read-only and, for ``get`` and
``get_all``, already shows the writes of earlier records of the same batch.

Without a processor, each record's key and value bytes are stored as they are: the topic
must then be in the store's key and value formats (as a changelog is).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samzapy.config.model import Processor
from samzapy.container.envelopes import envelope_of
from samzapy.errors import TaskError
from samzapy.records import Record
from samzapy.serdes import Serde
from samzapy.stores.base import KeyValueStore
from samzapy.streams import SystemStreamPartition
from samzapy.task import IncomingMessageEnvelope


class PendingView:
    """The store as a processor sees it mid-batch.

    ``get`` and ``get_all`` show the batch's pending writes first, then the store; every other
    read sees the store as it was.
    """

    def __init__(
        self,
        store: KeyValueStore[Any, Any],
        key_serde: Serde | None,
        pending: dict[bytes, bytes | None],
        msg_serde: Serde | None,
    ) -> None:
        self._store = store
        self._kb = key_serde.to_bytes if key_serde is not None else _identity
        self._vo = msg_serde.from_bytes if msg_serde is not None else _identity
        self._pending = pending

    def get(self, key: Any) -> Any:
        """The value of ``key``, pending writes included."""
        raw = self._kb(key)
        if raw in self._pending:
            value = self._pending[raw]
            return None if value is None else self._vo(value)
        return self._store.get(key)

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        """The present values of ``keys``, pending writes included."""
        found = {key: self.get(key) for key in keys}
        return {k: v for k, v in found.items() if v is not None}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class RecordWriter:
    """Turns side-input records into raw ``(key bytes, value bytes | None)`` writes.

    Args:
        store_name: for error messages.
        processor: the user's processor, or ``None`` for bytes as they are.
        stream_serdes: ``(key, message)`` serdes of each side-input stream name.
        store_serdes: the store's ``(key, message)`` serdes.
        store: the read-only store handed to the processor.
    """

    def __init__(
        self,
        store_name: str,
        processor: Processor | None,
        stream_serdes: dict[str, tuple[Serde | None, Serde | None]],
        store_serdes: tuple[Serde | None, Serde | None],
        store: KeyValueStore[Any, Any],
    ) -> None:
        self.store_name = store_name
        self.processor = processor
        self.stream_serdes = stream_serdes
        self.key_serde, self.msg_serde = store_serdes
        self.store = store
        self.skipped = 0  # records without a key (the default processor cannot store them)

    def writes(self, system: str, topic: str, partition: int, records: list[Record]) -> dict[bytes, Any]:
        """The writes of ``records``, last write per key; ``None`` values delete."""
        pending: dict[bytes, bytes | None] = {}
        if self.processor is None:
            for record in records:
                if record.key is None:
                    self.skipped += 1  # as Kafka Streams' global tables: a null key cannot be stored
                    continue
                pending[record.key] = record.value
            return pending
        ssp = SystemStreamPartition(system, topic, partition)
        view = PendingView(self.store, self.key_serde, pending, self.msg_serde)
        kb = self.key_serde.to_bytes if self.key_serde is not None else _identity
        vb = self.msg_serde.to_bytes if self.msg_serde is not None else _identity
        for record in records:
            try:
                for key, value in self.processor(self._envelope(ssp, record), view) or ():
                    pending[kb(key)] = None if value is None else vb(value)
            except Exception as exc:
                msg = (
                    f"side-input processor of store '{self.store_name}' failed for the record at stream "
                    f"'{system}.{topic}' partition {partition} offset {record.offset}: "
                    f"{type(exc).__name__}: {exc}"
                )
                raise TaskError(msg) from exc
        return pending

    def _envelope(self, ssp: SystemStreamPartition, record: Record) -> IncomingMessageEnvelope:
        return envelope_of(ssp, record, *self.stream_serdes[ssp.stream])


def _identity(data: Any) -> Any:
    return data

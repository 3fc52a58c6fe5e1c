"""Stores filled from side-input topics.

Engines that keep the topic offsets they reflect with the data, and the read-only layer tasks
see.

A side-input store has no changelog: its side-input topics are its changelog. So the
position that matters on restart is "the next offset of each side-input partition that the
data reflects". The RocksDB engine writes those offsets into a column family of its own
(``side-input-offsets``) **in the same WriteBatch** as the data they cover (as Quix Streams
keeps changelog offsets), so after a crash, kill -9 included, data and offsets cannot
drift: a restart trusts them and reads only the tail of each topic. The in-memory engine
keeps its offsets in memory and starts empty, so it is always rebuilt from the beginning.

Stack built by :func:`build_side_input_store`, outermost first::

    StorageEngine       metrics (what context.get_store() returns)
     └ ReadOnlyStore    reads pass; writes raise StoreError (the topic is the source of truth)
       └ SerializedStore    objects <-> bytes with the store's serdes
         └ SideInputRocksDBStore | SideInputMemoryStore   bytes + offsets

No object cache: :mod:`samzapy.container.side_inputs` writes into the engine underneath,
and a cache above it would serve stale values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from rocksdict import ColumnFamily, Options, WriteBatch

from samzapy.config.model import StoreConfig
from samzapy.errors import StoreError
from samzapy.metrics import MetricsGroup
from samzapy.stores.base import KeyValueStore, RawStore
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import rocksdb_options
from samzapy.stores.failures import is_rocksdb_error, storage_failure
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.rocksdb import DEFAULT_LOCK_TIMEOUT_S, RocksDBStore
from samzapy.stores.serialized import Serde, SerializedStore
from samzapy.stores.wrapped import WrappedStore

#: The column family holding ``topic/partition -> next offset`` of a side-input store.
OFFSETS_CF = "side-input-offsets"

#: A side-input partition: (topic, partition).
TopicPartitionKey = tuple[str, int]
Writes = Iterable[tuple[bytes, bytes | None]]


def encode_tp(tp: TopicPartitionKey) -> bytes:
    """The offsets key of a partition (Kafka topic names cannot contain ``/``).

    >>> encode_tp(("profiles", 3))
    b'profiles/3'
    """
    return f"{tp[0]}/{tp[1]}".encode()


def decode_tp(key: bytes) -> TopicPartitionKey:
    """The inverse of :func:`encode_tp`.

    >>> decode_tp(b'profiles/3')
    ('profiles', 3)
    """
    topic, _, partition = key.decode().rpartition("/")
    return topic, int(partition)


class SideInputRocksDBStore(RocksDBStore):
    """A RocksDB engine whose side-input offsets live in the same database as its data.

    :meth:`apply` writes data and offsets in one atomic WriteBatch, so the offsets read
    back by :meth:`offsets` always describe exactly the data present. :meth:`wipe` empties
    both (for a rebuild from scratch). Not thread-safe.
    """

    def _offsets_handle(self) -> ColumnFamily:
        db = self._live()
        try:
            return db.get_column_family_handle(OFFSETS_CF)
        except Exception:  # noqa: BLE001 - rocksdict raises plain Exception: the family is missing
            created = db.create_column_family(OFFSETS_CF, Options(raw_mode=True))
            del created  # a live column-family object keeps the database lock after close()
            return db.get_column_family_handle(OFFSETS_CF)

    def apply(self, entries: Writes, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Write ``entries`` (``None`` deletes) and the next ``offsets`` in one WriteBatch."""
        handle = self._offsets_handle()
        batch = WriteBatch(raw_mode=True)
        for key, value in entries:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        for tp, offset in offsets.items():
            batch.put(encode_tp(tp), str(offset).encode(), handle)
        try:
            self._live().write(batch)
        except Exception as exc:
            if not is_rocksdb_error(exc):
                raise
            raise storage_failure(exc, self.path, "writing side-input records") from exc

    def offsets(self) -> dict[TopicPartitionKey, int]:
        """The next offset of each side-input partition the data reflects (empty: none)."""
        db = self._live()
        if OFFSETS_CF not in db.list_cf(str(self.path)):
            return {}
        family = db.get_column_family(OFFSETS_CF)
        try:
            # a raw-mode family: keys and values are bytes (the stub types any key type)
            return {decode_tp(key): int(value) for key, value in family.items()}  # type: ignore[arg-type]
        finally:
            del family  # see _offsets_handle

    def wipe(self) -> None:
        """Delete every entry and every offset."""
        self.reset(None)


class SideInputMemoryStore(InMemoryStore):
    """The in-memory engine with its offsets beside it; nothing survives the process."""

    def __init__(self) -> None:
        super().__init__()
        self._offsets: dict[TopicPartitionKey, int] = {}

    def apply(self, entries: Writes, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Write ``entries`` (``None`` deletes) and remember the next ``offsets``."""
        self.put_all(list(entries))
        self._offsets.update(offsets)

    def offsets(self) -> dict[TopicPartitionKey, int]:
        """The next offset of each side-input partition the data reflects."""
        return dict(self._offsets)

    def wipe(self) -> None:
        """Delete every entry and every offset."""
        self.__init__()  # type: ignore[misc]


class ReadOnlyStore(WrappedStore[Any, Any]):
    """The task's view of a side-input store: reads pass through (not overridden), writes raise.

    A task must not write: its side-input topics are the store's only source (a local
    write would be lost at the next rebuild, and a global store is shared by every task of
    the container). Produce to the side-input topic instead.
    """

    def __init__(self, inner: KeyValueStore[Any, Any], name: str, topics: str) -> None:
        super().__init__(inner)
        self._name = name
        self._topics = topics

    def _refuse(self) -> NoReturn:
        msg = (
            f"store '{self._name}' is filled from its side inputs (stores.{self._name}.side.inputs="
            f"{self._topics}) and is read-only for tasks: produce to {self._topics} to change it"
        )
        raise StoreError(msg)

    def put(self, key: Any, value: Any | None) -> None:
        """Refused: see the class doc."""
        self._refuse()

    def put_all(self, entries: Iterable[tuple[Any, Any | None]]) -> None:
        """Refused: see the class doc."""
        self._refuse()

    def delete(self, key: Any) -> None:
        """Refused: see the class doc."""
        self._refuse()

    def delete_all(self, keys: Iterable[Any]) -> None:
        """Refused: see the class doc."""
        self._refuse()

    def flush(self) -> None:
        """Nothing to flush: the side-input writer writes the engine directly."""


def build_side_input_store(
    config: StoreConfig,
    *,
    path: Path,
    key_serde: Serde | None,
    msg_serde: Serde | None,
    metrics: MetricsGroup,
    partition: int = -1,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> StorageEngine[Any, Any]:
    """The stack of the module docstring over a RocksDB (at ``path``) or in-memory engine.

    ``partition`` names the task's partition (``-1``: a global store). The engine is the
    engine's ``raw`` attribute: the side-input writer applies records and offsets there.
    """
    if config.engine == "inmemory":
        raw: RawStore = SideInputMemoryStore()
    else:
        raw = SideInputRocksDBStore(path, rocksdb_options(config), lock_timeout_s)
    topics = ",".join(str(s) for s in config.side_inputs)
    layers = ReadOnlyStore(SerializedStore(raw, key_serde, msg_serde, metrics), config.name, topics)
    return StorageEngine(config.name, partition, layers, raw=raw, changelog=None, metrics=metrics)

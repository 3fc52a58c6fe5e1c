"""Key-value stores: the API, the engines (RocksDB, in-memory), the layers and restore.

The public surface: :class:`KeyValueStore` (what tasks use), :class:`StorageEngine` (what
``context.get_store()`` returns), :func:`build_store` and :class:`KafkaChangelog`.
"""

from samzapy.stores.base import Entry, KeyValueIterator, KeyValueStore
from samzapy.stores.changelog import ChangelogWriter, KafkaChangelog
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.restore import RestoreStats

__all__ = [
    "ChangelogWriter",
    "Entry",
    "KafkaChangelog",
    "KeyValueIterator",
    "KeyValueStore",
    "RestoreStats",
    "StorageEngine",
    "build_store",
]

"""Key-value stores: the API, the engines (RocksDB, in-memory), the layers and restore.

The public surface: :class:`KeyValueStore` (what tasks use), :class:`StorageEngine` (what
``context.get_store()`` returns), :func:`build_store`, the changelog protocols and the changelogs
that need no broker (the Kafka one is :class:`samzapy.kafka.changelog.KafkaChangelog`), and, for
layer authors, :class:`WrappedStore` and :class:`RawStore`.
"""

from samzapy.stores.base import Entry, KeyValueIterator, KeyValueStore, RawStore, ReadView
from samzapy.stores.changelog import ChangelogWriter, DiscardingChangelog, RestorableChangelog
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.stores.memory_changelog import InMemoryChangelog
from samzapy.stores.restore import RestoreStats
from samzapy.stores.wrapped import WrappedStore

__all__ = [
    "ChangelogWriter",
    "DiscardingChangelog",
    "Entry",
    "InMemoryChangelog",
    "KeyValueIterator",
    "KeyValueStore",
    "RawStore",
    "ReadView",
    "RestorableChangelog",
    "RestoreStats",
    "StorageEngine",
    "WrappedStore",
    "build_store",
]

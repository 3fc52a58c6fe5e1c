"""Key-value stores: the API, the engines (RocksDB, in-memory), the layers and restore."""

from samzapy.stores.base import Entry, KeyValueIterator, KeyValueStore

__all__ = ["Entry", "KeyValueIterator", "KeyValueStore"]

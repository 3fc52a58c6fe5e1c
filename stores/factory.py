"""``build_store``: the one place that knows the order of the store layers.

Outermost first::

    StorageEngine   metrics; restore, flush, checkpoint (what context.get_store() returns)
     └ SerdeCheckedStore  a put() that does not fit the serdes fails there (only with a cache)
      └ CachedStore      LRU of deserialised objects + dirty batch   (skipped: object.cache.size=0)
       └ SerializedStore    objects <-> bytes
         └ LoggedStore      every write also to the changelog       (skipped: no changelog)
           └ RocksDBStore | InMemoryStore   bytes, sorted by key bytes

The cache sits above the serde, as in Samza, so that a hit costs no deserialisation (the
expensive part in Python) and a dirty key is serialised once per write-down, not per put.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from samzapy.config.model import ROCKSDB_COMPRESSIONS, STORE_ENGINES, StoreConfig
from samzapy.errors import ConfigError
from samzapy.metrics import MetricsGroup
from samzapy.stores.base import KeyValueStore, RawStore
from samzapy.stores.cached import CachedStore
from samzapy.stores.changelog import ChangelogWriter
from samzapy.stores.engine import StorageEngine
from samzapy.stores.logged import LoggedStore
from samzapy.stores.memory import InMemoryStore
from samzapy.stores.paths import store_dir
from samzapy.stores.rocksdb import DEFAULT_LOCK_TIMEOUT_S, RocksDBOptions, RocksDBStore
from samzapy.stores.serialized import Serde, SerdeCheckedStore, SerializedStore

log = logging.getLogger(__name__)


__all__ = ["build_store", "rocksdb_options", "store_dir", "validate"]


def validate(config: StoreConfig) -> None:
    """Check the single options of one store; every problem in one :class:`ConfigError`.

    A guard for a :class:`StoreConfig` built by hand: one from ``parse_job_config`` has passed
    these checks and the rules across keys (``samzapy/config/stores.py``) already.
    """
    key = f"stores.{config.name}"
    problems = []
    if config.engine not in STORE_ENGINES:
        problems.append(f"'{key}.factory' is '{config.engine}': must be one of {', '.join(STORE_ENGINES)}")
    if config.compression not in ROCKSDB_COMPRESSIONS:
        problems.append(
            f"'{key}.rocksdb.compression' is '{config.compression}': "
            f"must be one of {', '.join(ROCKSDB_COMPRESSIONS)}"
        )
    for option, value, minimum in (
        ("object.cache.size", config.object_cache_size, 0),
        ("write.batch.size", config.write_batch_size, 1),
        ("container.cache.size.bytes", config.cache_size_bytes, 0),
        ("container.write.buffer.size.bytes", config.write_buffer_size_bytes, 1),
        ("rocksdb.block.size.bytes", config.block_size_bytes, 1),
    ):
        if value < minimum:
            problems.append(f"'{key}.{option}' is {value}: must be >= {minimum}")
    if config.ttl_ms is not None and config.ttl_ms <= 0:
        problems.append(f"'{key}.rocksdb.ttl.ms' is {config.ttl_ms}: must be > 0 (or unset for no TTL)")
    if problems:
        raise ConfigError("invalid store configuration:\n  " + "\n  ".join(problems))


def rocksdb_options(config: StoreConfig) -> RocksDBOptions:
    """The resolved RocksDB options of a store."""
    return RocksDBOptions(
        cache_size_bytes=config.cache_size_bytes,
        write_buffer_size_bytes=config.write_buffer_size_bytes,
        compression=config.compression,
        block_size_bytes=config.block_size_bytes,
        ttl_ms=config.ttl_ms,
        shared_by=config.name,
    )


def _engine(config: StoreConfig, path: Path, lock_timeout_s: float) -> RawStore:
    if config.engine == "inmemory":
        return InMemoryStore()
    return RocksDBStore(path, rocksdb_options(config), lock_timeout_s)


def _maybe_logged(
    inner: KeyValueStore[bytes, bytes], changelog: ChangelogWriter | None, coalesce: bool = False
) -> KeyValueStore[bytes, bytes]:
    return inner if changelog is None else LoggedStore(inner, changelog, coalesce=coalesce)


def _maybe_cached(
    inner: KeyValueStore[Any, Any], config: StoreConfig, metrics: MetricsGroup
) -> KeyValueStore[Any, Any]:
    if config.object_cache_size == 0:
        return inner
    return CachedStore(inner, config.object_cache_size, config.write_batch_size, metrics)


def _maybe_checked(
    inner: KeyValueStore[Any, Any], config: StoreConfig, key_serde: Serde | None, msg_serde: Serde | None
) -> KeyValueStore[Any, Any]:
    # Above the cache a misfit would surface only at its next write-down, far from the task's
    # put(): check there. Without a cache, SerializedStore fails in the put() itself.
    if not isinstance(inner, CachedStore):
        return inner
    return SerdeCheckedStore(inner, config.name, key_serde, msg_serde)


def build_store(
    config: StoreConfig,
    *,
    partition: int,
    base_dir: Path,
    key_serde: Serde | None,
    msg_serde: Serde | None,
    changelog: ChangelogWriter | None,
    metrics: MetricsGroup,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> StorageEngine[Any, Any]:
    """Validate ``config``, then build the store's layers (module doc) over its engine.

    ``changelog`` is a :class:`~samzapy.stores.changelog.RestorableChangelog` (a
    ``KafkaChangelog`` in a job, an ``InMemoryChangelog`` in tests: logged and restorable), any
    other :class:`~samzapy.stores.changelog.ChangelogWriter` (logged only, e.g. a
    ``DiscardingChangelog``), or ``None`` (not logged).
    A RocksDB directory that does not open is wiped (the restore refills it); one locked by
    another live process is waited for up to ``lock_timeout_s``, then
    :class:`~samzapy.errors.StoreLockedError`.
    """
    validate(config)
    if changelog is None:
        log.info(
            "store %s has no changelog (stores.%s.changelog): not logged, not restorable",
            config.name,
            config.name,
        )
    raw = _engine(config, store_dir(base_dir, config.name, partition), lock_timeout_s)
    store: KeyValueStore[Any, Any] = _maybe_logged(raw, changelog, config.changelog_coalesce)
    store = SerializedStore(store, key_serde, msg_serde, metrics, name=config.name)
    store = _maybe_checked(_maybe_cached(store, config, metrics), config, key_serde, msg_serde)
    return StorageEngine(
        config.name,
        partition,
        store,
        raw=raw,
        changelog=changelog,
        metrics=metrics,
    )

"""Migrate a stopped job's store values offline.

Every value rewritten, in the changelog and in the local stores, so that a job deployed with a
new value format starts on migrated state.

:func:`migrate_state` reads the store's committed state (each task's changelog up to its
checkpoint), calls ``fn(key, value)`` on every entry in the executors (objects decoded with the
store's serdes, or with ``decode``), encodes what it returns (with ``encode``, default the
store's serde; ``None`` deletes the key) and writes the result as
:func:`samzapy.spark.state_data.write.rewrite_partitions` does: changelog, SSTs, local
checkpoints, task checkpoints. Keys stay in their tasks.

:func:`migrate_avro_schema` is the Avro case: values written with the old writer schema are
read into the new schema by Avro's resolution rules (added fields take their defaults,
removed fields are dropped) and written with the new schema. Deploy the job with the new
schema as its serde's ``schema`` afterwards.

Example::

    migrate_avro_schema("job.properties", "users", "schemas/user-v2.avsc")
    # then: serializers.registry.user.schema=schemas/user-v2.avsc, and start the job
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from samzapy.config import Config
from samzapy.serdes import AvroSerde, Serde, SerdeResolver
from samzapy.spark import SparkJobError
from samzapy.spark.state_data.write import ENTRY_SCHEMA, WriteStats, entry_arrow_schema, rewrite_partitions


def migrate_state(
    config: str | Path | Config,
    store: str,
    fn: Callable[[Any, Any], Any],
    *,
    decode: Serde | None = None,
    encode: Serde | None = None,
    spark: Any = None,
    base_dir: str | Path | None = None,
    master: str | None = None,
) -> WriteStats:
    """Rewrite every value of ``store`` as ``fn(key, value)`` (module doc).

    Args:
        config: the job's .properties path or :class:`Config` (as deployed now).
        store: a logged RocksDB store.
        fn: picklable (it runs in the executors); returns the new value, ``None`` to delete.
        decode: the serde of the old values (default: the store's msg serde).
        encode: the serde of the new values (default: the store's msg serde).
        spark: a SparkSession (default: :func:`samzapy.spark.session.get_spark`'s).
        base_dir: where the local stores go (default: ``job.logged.store.base.dir``).
        master: the Spark master URL when no ``spark`` is given
            (:func:`samzapy.spark.session.get_spark`).

    Raises:
        SparkJobError: the store cannot be written, a value does not decode or encode, or
            the Spark job failed (the changelog may then hold part of the migration: run it
            again only if ``fn`` accepts values it already migrated).
    """
    from samzapy.operators.state_layout import KeyValueLayout
    from samzapy.spark.session import get_spark
    from samzapy.spark.state_data.read import changelog_sources, job_of, raw_frame
    from samzapy.spark.state_data.write import _logged_store, task_count

    raw_config, job = job_of(config)
    target = _logged_store(job, store)
    spark = spark or get_spark(master, "samzapy-migrate")[0]
    key_serde, msg_serde = SerdeResolver(job).for_store(target)
    sources = changelog_sources(job, target, None, to_checkpoint=True)
    layouts: dict[str, Any] = {store: KeyValueLayout()}  # raw bytes: decoded by _Migrator
    migrated = raw_frame(spark, job, layouts, sources).mapInArrow(
        _Migrator(fn, key_serde, decode or msg_serde, encode or msg_serde), ENTRY_SCHEMA
    )
    base = Path(base_dir) if base_dir else job.logged_store_base_dir
    return rewrite_partitions(spark, migrated, job, [target], task_count(job, target), base)


def migrate_avro_schema(
    config: str | Path | Config,
    store: str,
    new_schema: dict[str, Any] | str | Path,
    **options: Any,
) -> WriteStats:
    """Rewrite the Avro values of ``store`` from its serde's schema to ``new_schema`` (module doc).

    Raises:
        SparkJobError: the store's values are not Avro, or a value cannot be resolved into
            the new schema (e.g. a new field without a default).
    """
    from samzapy.spark.state_data.read import job_of

    _, job = job_of(config)
    if store not in job.stores:
        msg = f"store '{store}' is not in the config: its stores are {', '.join(job.stores)}"
        raise SparkJobError(msg)
    name = job.stores[store].msg_serde
    spec = job.serializers.get(name) if name else None
    if spec is None or spec.kind != "avro" or spec.schema_path is None:
        msg = f"store '{store}' has the value serde '{name}', not an avro serde with a schema"
        raise SparkJobError(msg)
    old = Path(spec.schema_path)
    decode = AvroSerde(old, new_schema)
    return migrate_state(config, store, _keep_value, decode=decode, encode=AvroSerde(new_schema), **options)


def _keep_value(key: Any, value: Any) -> Any:
    return value


class _Migrator:
    """Executor side: raw state rows -> ENTRY_SCHEMA rows with the migrated value."""

    def __init__(
        self,
        fn: Callable[[Any, Any], Any],
        key_serde: Serde | None,
        decode: Serde | None,
        encode: Serde | None,
    ) -> None:
        self.fn, self.key_serde, self.decode, self.encode = fn, key_serde, decode, encode

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        schema = entry_arrow_schema()
        for batch in batches:
            names = ("store", "partition", "key_bytes", "value_bytes")
            stores, partitions, keys, values = (batch.column(n).to_pylist() for n in names)
            new_values = [self._migrate(k, v) for k, v in zip(keys, values, strict=True)]
            columns = {"store": stores, "partition": partitions, "key": keys, "value": new_values}
            yield pa.RecordBatch.from_pydict(columns, schema=schema)

    def _migrate(self, key: bytes, value: bytes) -> bytes | None:
        from samzapy.errors import SerdeError

        try:
            key_obj = self.key_serde.from_bytes(key) if self.key_serde else key
            old = self.decode.from_bytes(value) if self.decode else value
            new = self.fn(key_obj, old)
            if new is None:
                return None
            return self.encode.to_bytes(new) if self.encode else bytes(new)
        except SerdeError as exc:
            msg = f"migrating key {key!r}: {exc}"
            raise SparkJobError(msg) from exc

"""Spark for the bulk work: restoring a job's stores from their changelogs in parallel, and
replaying a job's input history through its own task class (DESIGN §8).

Everything here needs the ``spark`` extra (``pip install 'samzapy[spark]'``); pyspark is
imported lazily, so importing this package costs nothing and fails with an install hint only
when a Spark session is actually needed.

- :func:`samzapy.spark.bulk_restore.restore_stores` — changelogs -> SST files -> RocksDB stores
  in the job's layout, with the local checkpoint the job's own restore trusts.
- :func:`samzapy.spark.replay.replay` — a job's input history through its task class, outputs to
  Kafka (same ``samzapy.id`` headers and bytes as streaming) or to Parquet/Avro files.
- :mod:`samzapy.spark.kafka_source` — the ``samzapy-kafka`` PySpark data source (kafka-python
  in the executors; there is no Spark Kafka connector jar here).
"""

from samzapy.errors import SamzapyError


class SparkJobError(SamzapyError):
    """A Spark restore or replay could not run or failed in an executor."""


__all__ = ["SparkJobError"]

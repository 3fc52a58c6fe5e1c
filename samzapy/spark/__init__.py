"""Spark for the bulk work (DESIGN §8), in three products over shared machinery.

- :mod:`samzapy.spark.restore` — bulk restore: changelogs -> SST files -> RocksDB stores in
  the job's layout, with the local checkpoint the job's own restore trusts
  (:func:`restore_stores`).
- :mod:`samzapy.spark.replay` — a job's input history through its own task class, outputs to
  Kafka (same ``samzapy.id`` headers and bytes as streaming) or to Parquet/Avro files
  (``from samzapy.spark.replay import replay``; :func:`read_outputs`).
- :mod:`samzapy.spark.state_data` — state as data: a job's stores as DataFrames, read, written,
  re-sharded and migrated (:func:`read_state`, :func:`write_state`, :func:`export_frame`,
  :func:`reshard`, :func:`migrate_state`). How each store's entries read is the operators'
  own declaration (:mod:`samzapy.operators.state_layout`).

Shared by the three: :mod:`~samzapy.spark.session` (:func:`get_spark`, the warmed-up local
session), :mod:`~samzapy.spark.kafka_source` (the ``samzapy-kafka`` PySpark data source;
kafka-python in the executors, no Spark Kafka connector jar) and :mod:`~samzapy.spark.sst`
(SST files written in executors and ingested into stores).

Everything here needs the ``spark`` extra (``pip install 'samzapy[spark]'``); pyspark is
imported lazily, so importing this package costs nothing and fails with an install hint only
when a Spark session is actually needed. The public names above are importable from here
(``from samzapy.spark import read_state``); each loads its product's modules when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

from samzapy.errors import SamzapyError


class SparkJobError(SamzapyError):
    """A Spark restore or replay could not run or failed in an executor."""


#: Public name -> the module that defines it (loaded on first use: no pyspark at import).
_PUBLIC = {
    "restore_stores": "samzapy.spark.restore.bulk",
    "read_outputs": "samzapy.spark.replay.sinks",
    "read_state": "samzapy.spark.state_data.read",
    "write_state": "samzapy.spark.state_data.write",
    "export_frame": "samzapy.spark.state_data.export",
    "reshard": "samzapy.spark.state_data.reshard",
    "migrate_state": "samzapy.spark.state_data.migrate",
    "get_spark": "samzapy.spark.session",
}

__all__ = ["SparkJobError", *_PUBLIC]


def __getattr__(name: str) -> Any:
    """The public function ``name`` (:data:`_PUBLIC`), imported from its module on first use."""
    module = _PUBLIC.get(name)
    if module is None:
        msg = f"module 'samzapy.spark' has no attribute '{name}'"
        raise AttributeError(msg)
    return getattr(importlib.import_module(module), name)

"""Bulk restore: a job's stores rebuilt from their changelogs by Spark, in parallel.

The state is written as SST files ingested into RocksDB
(:func:`~samzapy.spark.restore.bulk.restore_stores`; ``state-storage-tool restore --engine
spark``, and a container's own start for stores with ``stores.<s>.restore.engine=spark``).
"""

from samzapy.spark.restore.bulk import BulkRestoreStats, restore_for_container, restore_stores

__all__ = ["BulkRestoreStats", "restore_for_container", "restore_stores"]

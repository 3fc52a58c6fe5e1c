"""State as data: a job's stores as Spark DataFrames.

:mod:`~samzapy.spark.state_data.read` reads them (from changelogs or from disk) through the
operators' layouts (:mod:`samzapy.operators.state_layout`),
:mod:`~samzapy.spark.state_data.write` writes rows back as changelogs and stores,
:mod:`~samzapy.spark.state_data.export` writes files, :mod:`~samzapy.spark.state_data.reshard`
moves the state to another task count (the task-own entries combined by
:mod:`~samzapy.spark.state_data.reshard_own`) and :mod:`~samzapy.spark.state_data.migrate`
rewrites values to a new schema.
"""

from samzapy.spark.state_data.export import export_frame
from samzapy.spark.state_data.migrate import migrate_state
from samzapy.spark.state_data.read import read_state
from samzapy.spark.state_data.reshard import reshard
from samzapy.spark.state_data.write import write_state

__all__ = ["export_frame", "migrate_state", "read_state", "reshard", "write_state"]

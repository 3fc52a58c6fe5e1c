"""Replay: a job's input history through its own task class on Spark.

:func:`~samzapy.spark.replay.driver.replay` plans it on the driver;
:mod:`~samzapy.spark.replay.partition` runs one task's range in an executor;
:mod:`~samzapy.spark.replay.sinks` writes outputs to files and reads them back.
"""

from samzapy.spark.replay.driver import parse_offsets, parse_time, replay
from samzapy.spark.replay.sinks import read_outputs

__all__ = ["parse_offsets", "parse_time", "read_outputs", "replay"]

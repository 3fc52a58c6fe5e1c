"""The Spark replay job: ``spark-submit jobs/spark_replay.py --config-path job.properties ...``.

Runs the job's own task class over its input history (see :mod:`samzapy.spark.replay`); the
options are those of ``samzapy replay`` (:mod:`samzapy.cli.replay`), which is the same
command run from plain Python with a local Spark.
"""

from __future__ import annotations

from samzapy.cli.replay import replay


def main() -> None:
    """Entry point for spark-submit."""
    replay(prog_name="spark_replay.py")


if __name__ == "__main__":
    main()

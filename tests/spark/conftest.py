"""Spark tests: one local SparkSession for the whole test session (start-up costs seconds).

Tasks used by these tests live in ``tests/spark/spark_tasks.py``; Spark's Python workers and
job subprocesses find them through ``PYTHONPATH``, set here before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SPARK_TESTS = Path(__file__).parent
sys.path.insert(0, str(SPARK_TESTS))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SPARK_TESTS), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` session with the UI off and few shuffle partitions, stopped at the end."""
    pytest.importorskip("pyspark")
    from samzapy.spark.session import get_spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("samzapy-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    get_spark()  # registers the samzapy-kafka data source on the active session
    try:
        yield session
    finally:
        session.stop()

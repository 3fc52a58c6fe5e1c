"""The SparkSession samzapy's Spark jobs run in.

Inside ``spark-submit`` the submitted configuration (master, executors, ...) is used as it is;
from plain Python (``samzapy replay``, ``state-storage-tool restore --engine spark``, a
container with ``stores.S.restore.engine=spark``) the master defaults to ``local[*]``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from samzapy.spark import SparkJobError

log = logging.getLogger(__name__)

#: Settings for a session samzapy creates itself (spark-submit's own settings win there).
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    # Replay tasks have side effects (outputs, changelog writes): never run one twice at once.
    "spark.speculation": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.ui.showConsoleProgress": "false",
}
#: What an executor's Python imports for samzapy's jobs; a new session's warm-up imports it
#: in every worker, so the first job does not pay for it.
EXECUTOR_MODULES = (
    "samzapy.spark.restore.bulk",
    "samzapy.spark.restore.last_values",  # with pyarrow.compute, pyarrow.acero and numpy
    "samzapy.spark.state_data.read",
    "samzapy.spark.replay.partition",
)
INSTALL_HINT = "PySpark is not installed: install samzapy's spark extra (pip install 'samzapy[spark]')"


def require_pyspark() -> Any:
    """Import and return ``pyspark``, or raise :class:`SparkJobError` with the install hint."""
    try:
        import pyspark
    except ImportError as exc:
        raise SparkJobError(INSTALL_HINT) from exc
    return pyspark


def under_spark_submit() -> bool:
    """Whether this process was started by ``spark-submit`` (which sets the gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark(master: str | None = None, app_name: str = "samzapy") -> tuple[Any, float]:
    """The active SparkSession (or a new one) with the ``samzapy-kafka`` data source registered.

    Returns the session and the seconds it took to start (0 when one was active already),
    so that callers can report Spark's start-up cost apart from the work. A session started
    here is warmed up before it is returned: one task per core starts its Python worker and
    imports samzapy's executor modules, which the first job of a session would otherwise pay
    for (about 5 s on two cores); the seconds returned include it.

    Args:
        master: a Spark master URL; ``None``: spark-submit's, or ``local[*]`` from plain Python.
        app_name: the application name of a session started here.
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    from samzapy.spark.kafka_source import KafkaDataSource

    started = time.perf_counter()
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        spark, elapsed = active, 0.0
    else:
        # Executors must run the interpreter that has samzapy installed.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(app_name)
        if master is not None or not under_spark_submit():
            builder = builder.master(master or "local[*]")
            for key, value in LOCAL_DEFAULTS.items():
                builder = builder.config(key, value)
        spark = builder.getOrCreate()
        warm_up(spark)
        elapsed = time.perf_counter() - started
        log.info("Spark session on %s started in %.1fs", spark.sparkContext.master, elapsed)
    spark.dataSource.register(KafkaDataSource)
    return spark, elapsed


def warm_up(spark: Any) -> None:
    """Run a job of samzapy's shape on every core of ``spark``.

    A frame built from Python rows, mapped in Arrow batches by Python workers that import
    samzapy's executor modules, then the same as an RDD job. The workers stay for later jobs
    (``spark.python.worker.reuse``, on by default), and the JVM has loaded and compiled the
    Arrow, Python-UDF and RDD paths the bulk restore and state reads use.
    """
    cores = max(1, spark.sparkContext.defaultParallelism)
    rows = spark.sparkContext.parallelize([(n,) for n in range(cores)], cores)
    frame = spark.createDataFrame(rows, "n INT")
    frame.mapInArrow(_import_executor_modules, "n INT").collect()
    # The bulk restore's in-memory plan is an RDD job, whose Python workers are not the
    # DataFrame's: warm those too.
    spark.sparkContext.parallelize(range(cores), cores).mapPartitions(_import_executor_modules).collect()


def _import_executor_modules(batches: Any) -> Any:
    import importlib

    for name in EXECUTOR_MODULES:
        importlib.import_module(name)
    yield from batches


def executor_error(exc: BaseException) -> str:
    """The useful line(s) of an exception raised by Python code in an executor.

    Spark wraps them in long JVM traces; the last Python exception line names the cause.
    """
    text = str(exc)
    lines = [line for line in text.splitlines() if line.strip()]
    for marker in ("MessageFailure", "SamzapyError", "Error:", "Exception:"):
        found = [line for line in lines if marker in line and not line.startswith("\tat ")]
        if found:
            return found[-1].strip()
    return lines[0] if lines else type(exc).__name__

"""Write a state DataFrame (:func:`samzapy.spark.state_data.read.read_state`) to files.

``parquet`` and ``json`` are Spark's own writers (a directory of ``part-*`` files). ``avro``:
there is no spark-avro jar on these machines, so each Spark partition is written by fastavro
in its executor as ``part-<N>.avro`` (an Avro object container file), with a schema made from
the DataFrame's (:func:`avro_schema`; every field nullable).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from samzapy.spark import SparkJobError

FORMATS = ("parquet", "avro", "json")


def export_frame(frame: Any, fmt: str, path: str | Path) -> int:
    """Write ``frame`` to ``path`` (replaced if it exists) as ``fmt``; returns the rows written."""
    if fmt not in FORMATS:
        msg = f"format '{fmt}' is not one of {', '.join(FORMATS)}"
        raise SparkJobError(msg)
    # absolute: Spark's writers resolve a relative path against the JVM's working directory,
    # which is the driver's at the JVM's start, not necessarily now
    target = Path(path).resolve()
    if fmt == "avro":
        return _write_avro(frame, target)
    getattr(frame.write.mode("overwrite"), fmt)(str(target))
    count: int = frame.count()
    return count


def avro_schema(struct: Any, name: str = "StateRow") -> dict[str, Any]:
    """The Avro record schema of a Spark ``StructType`` (fields nullable, default null)."""
    return {
        "type": "record",
        "name": name,
        "fields": [
            {"name": f.name, "type": ["null", _avro_type(f.dataType, f"{name}_{f.name}")], "default": None}
            for f in struct.fields
        ],
    }


def _avro_type(data_type: Any, name: str) -> Any:
    from pyspark.sql import types as T

    simple = {
        T.StringType: "string",
        T.LongType: "long",
        T.IntegerType: "int",
        T.ShortType: "int",
        T.ByteType: "int",
        T.DoubleType: "double",
        T.FloatType: "float",
        T.BooleanType: "boolean",
        T.BinaryType: "bytes",
    }
    for spark_type, avro in simple.items():
        if isinstance(data_type, spark_type):
            return avro
    if isinstance(data_type, T.StructType):
        return avro_schema(data_type, name)
    if isinstance(data_type, T.ArrayType):
        return {"type": "array", "items": ["null", _avro_type(data_type.elementType, f"{name}_item")]}
    if isinstance(data_type, T.MapType):
        return {"type": "map", "values": ["null", _avro_type(data_type.valueType, f"{name}_value")]}
    return "string"  # decimals, dates, ...: written as their text


def _write_avro(frame: Any, target: Path) -> int:
    schema = avro_schema(frame.schema)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    directory = str(target.resolve())
    counts = frame.rdd.mapPartitionsWithIndex(
        lambda i, rows: _avro_part(directory, schema, i, rows)
    ).collect()
    return sum(counts)


def _avro_part(directory: str, schema: dict[str, Any], index: int, rows: Iterator[Any]) -> Iterator[int]:
    import fastavro

    records = [row.asDict(recursive=True) for row in rows]
    if records:
        with open(Path(directory) / f"part-{index:05d}.avro", "wb") as f:
            fastavro.writer(f, fastavro.parse_schema(schema), records)
    yield len(records)

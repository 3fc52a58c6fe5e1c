"""Replay outputs to files: what a task sends, as Parquet (pyarrow) or Avro (fastavro).

A :class:`FileOutputs` stands where the container's producer stands (``send(topic, key,
value, partition=, headers=)``), so the task's outputs go through the container's own
:class:`~samzapy.container.collector.TaskCollector`: same serialisation, same partition, same
``samzapy.id`` header. Layout: ``<dir>/<topic>/task-<N>.parquet`` (or ``.avro``), one file per
task and output topic; rows ``partition, key, value, headers, id, seq`` where ``seq`` is the
order in which the task sent them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from samzapy.output_ids import ID_HEADER

FORMATS = ("parquet", "avro")
#: Rows buffered per topic before they are written out.
FLUSH_ROWS = 50_000

AVRO_SCHEMA = {
    "type": "record",
    "name": "SamzapyOutput",
    "namespace": "samzapy.replay",
    "fields": [
        {"name": "partition", "type": ["null", "int"]},
        {"name": "key", "type": ["null", "bytes"]},
        {"name": "value", "type": ["null", "bytes"]},
        {
            "name": "headers",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Header",
                    "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": "bytes"}],
                },
            },
        },
        {"name": "id", "type": ["null", "string"]},
        {"name": "seq", "type": "long"},
    ],
}


def parquet_schema() -> Any:
    """The Arrow schema of an output file."""
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("partition", pa.int32()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(header)),
            ("id", pa.string()),
            ("seq", pa.int64()),
        ]
    )


class FileOutputs:
    """A producer-shaped sink writing one file per output topic for one task."""

    def __init__(self, directory: str | Path, task_partition: int, file_format: str = "parquet") -> None:
        if file_format not in FORMATS:
            msg = f"output format '{file_format}' is not one of {', '.join(FORMATS)}"
            raise ValueError(msg)
        self.directory = Path(directory)
        self.task_partition = task_partition
        self.format = file_format
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self._writers: dict[str, Any] = {}
        self._seq = 0
        self.files: list[str] = []

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Buffer one output record."""
        headers = list(headers or [])
        ids = [v.decode() for k, v in headers if k == ID_HEADER]
        row = {
            "partition": partition,
            "key": key,
            "value": value,
            "headers": [{"key": k, "value": v} for k, v in headers],
            "id": ids[-1] if ids else None,
            "seq": self._seq,
        }
        self._seq += 1
        rows = self._rows.setdefault(topic, [])
        rows.append(row)
        if len(rows) >= FLUSH_ROWS:
            self._write(topic)

    def flush(self) -> None:
        """Write every buffered row."""
        for topic in list(self._rows):
            self._write(topic)

    def acked_offset(self, topic: str, partition: int) -> None:
        """Files have no offsets."""
        return None

    def _path(self, topic: str) -> Path:
        path = self.directory / topic / f"task-{self.task_partition}.{self.format}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _write(self, topic: str) -> None:
        rows = self._rows.pop(topic, [])
        if not rows:
            return
        if self.format == "parquet":
            self._write_parquet(topic, rows)
        else:
            self._write_avro(topic, rows)

    def _write_parquet(self, topic: str, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        writer = self._writers.get(topic)
        if writer is None:
            path = self._path(topic)
            writer = self._writers[topic] = pq.ParquetWriter(str(path), parquet_schema())
            self.files.append(str(path))
        writer.write_table(pa.Table.from_pylist(rows, schema=parquet_schema()))

    def _write_avro(self, topic: str, rows: list[dict[str, Any]]) -> None:
        import fastavro

        path = self._path(topic)
        first = topic not in self._writers
        if first:
            self._writers[topic] = fastavro.parse_schema(AVRO_SCHEMA)
            self.files.append(str(path))
        with open(path, "wb" if first else "a+b") as f:
            fastavro.writer(f, self._writers[topic], rows)

    def close(self) -> None:
        """Write what is buffered and close the files."""
        self.flush()
        for writer in self._writers.values():
            if hasattr(writer, "close"):
                writer.close()
        self._writers.clear()


def read_outputs(directory: str | Path, topic: str) -> list[dict[str, Any]]:
    """Every output row of ``topic`` written under ``directory`` (all tasks), for tools and tests."""
    rows: list[dict[str, Any]] = []
    for path in sorted((Path(directory) / topic).glob("task-*")):
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows.extend(pq.read_table(str(path)).to_pylist())
        elif path.suffix == ".avro":
            import fastavro

            with open(path, "rb") as f:
                # records of the rows' schema: dicts (fastavro types a record as any Avro datum)
                rows.extend(cast("Iterator[dict[str, Any]]", fastavro.reader(f)))
    return rows

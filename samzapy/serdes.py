r"""Serdes: objects <-> bytes for message keys, message values and store entries.

A serde is any object with ``to_bytes(obj) -> bytes`` and ``from_bytes(data) -> Any``
(the :class:`Serde` protocol), and optionally ``check(obj)``, a cheap test that ``obj`` can be
written (stores call it at ``put()``; without it they call ``to_bytes``). A job registers its
own with ``serializers.registry.<name>.class=module:Class`` (called without arguments).
samzapy ships Samza's built-in ones under Samza's names
(``string``, ``json``, ``integer``, ``long``, ``bytes``) plus Avro. Every failure raises
:class:`samzapy.errors.SerdeError` naming the serde and what was wrong.

``None`` is never handed to a serde: a ``None`` key or value means "no key" or a tombstone
and passes through the layers above untouched, as in Samza.

>>> IntegerSerde().to_bytes(1)
b'\x00\x00\x00\x01'
>>> JsonSerde().from_bytes(JsonSerde().to_bytes({"user": "ann", "n": 2}))
{'user': 'ann', 'n': 2}
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from samzapy.config.model import JobConfig, SerdeSpec, StoreConfig
from samzapy.errors import SerdeError
from samzapy.streams import SystemStream

__all__ = [
    "BUILTIN_SERDES",
    "AvroSerde",
    "BytesSerde",
    "IntegerSerde",
    "JsonSerde",
    "LongSerde",
    "Serde",
    "SerdeResolver",
    "StringSerde",
    "build_serde",
]


@runtime_checkable
class Serde(Protocol):
    """Turns objects into bytes and back. Implementations raise ``SerdeError`` on failure."""

    def to_bytes(self, obj: Any) -> bytes:
        """Serialise ``obj``."""
        ...

    def from_bytes(self, data: bytes) -> Any:
        """Deserialise ``data``."""
        ...


def _describe(data: Any, limit: int = 40) -> str:
    """A short printable view of a bad input for error messages."""
    text = repr(data)
    return text if len(text) <= limit else text[:limit] + "..."


class StringSerde:
    """UTF-8 text (Samza's ``StringSerde``)."""

    __slots__ = ()

    def check(self, obj: Any) -> None:
        """Raise ``SerdeError`` unless ``obj`` is a ``str`` (cheap: stores check at ``put``)."""
        if not isinstance(obj, str):
            msg = f"StringSerde expects a str, got {type(obj).__name__} {_describe(obj)}"
            raise SerdeError(msg)

    def to_bytes(self, obj: Any) -> bytes:
        """Encode a ``str`` as UTF-8."""
        if not isinstance(obj, str):
            msg = f"StringSerde expects a str, got {type(obj).__name__} {_describe(obj)}"
            raise SerdeError(msg)
        try:
            return obj.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates
            msg = f"StringSerde cannot encode {_describe(obj)} as UTF-8: {exc}"
            raise SerdeError(msg) from exc

    def from_bytes(self, data: bytes) -> str:
        """Decode UTF-8 bytes."""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"StringSerde expects UTF-8 bytes, got {_describe(data)}: {exc}"
            raise SerdeError(msg) from exc
        except AttributeError as exc:
            msg = f"StringSerde expects bytes, got {type(data).__name__}"
            raise SerdeError(msg) from exc


class JsonSerde:
    """JSON via orjson (Samza's ``JsonSerde``).

    Output is deterministic: the same object always gives the same bytes (dicts keep their
    insertion order). With ``sort_keys=True`` equal dicts built in different orders also give
    the same bytes, at some cost; use it when the bytes are compared or used as store keys.
    Non-string dict keys (ints, ...) are written as strings.
    """

    __slots__ = ("_option",)

    def __init__(self, sort_keys: bool = False) -> None:
        self._option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)

    def to_bytes(self, obj: Any) -> bytes:
        """Serialise ``obj`` to compact UTF-8 JSON."""
        try:
            # A compact copy: orjson 3.13 hands back its 4 KiB write buffer as the bytes object,
            # and these bytes are kept (coalesced changelogs, producer batches' sources).
            return b"%b" % orjson.dumps(obj, option=self._option)
        except orjson.JSONEncodeError as exc:
            msg = f"JsonSerde cannot serialise {type(obj).__name__} {_describe(obj)}: {exc}"
            raise SerdeError(msg) from exc

    def from_bytes(self, data: bytes) -> Any:
        """Parse JSON bytes."""
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            msg = f"JsonSerde expects JSON, got {_describe(data)}: {exc}"
            raise SerdeError(msg) from exc


class _FixedIntSerde:
    """Shared code of the fixed-width big-endian signed integer serdes."""

    __slots__ = ()
    _name = ""
    _struct: struct.Struct

    def check(self, obj: Any) -> None:
        """Raise ``SerdeError`` unless ``obj`` is an int that fits (cheap: stores check at ``put``)."""
        self.to_bytes(obj)

    def to_bytes(self, obj: Any) -> bytes:
        """Pack ``obj`` big-endian."""
        if not isinstance(obj, int) or isinstance(obj, bool):
            msg = f"{self._name} expects an int, got {type(obj).__name__} {_describe(obj)}"
            raise SerdeError(msg)
        try:
            return self._struct.pack(obj)
        except struct.error as exc:
            bits = self._struct.size * 8
            msg = f"{self._name} cannot hold {obj}: it must fit in a signed {bits}-bit integer"
            raise SerdeError(msg) from exc

    def from_bytes(self, data: bytes) -> int:
        """Unpack big-endian bytes of exactly the serde's width."""
        try:
            value: int = self._struct.unpack(data)[0]
            return value
        except (struct.error, TypeError) as exc:
            got = f"{len(data)}" if isinstance(data, bytes | bytearray | memoryview) else "no"
            msg = f"{self._name} expects {self._struct.size} bytes, got {got}: {_describe(data)}"
            raise SerdeError(msg) from exc


class IntegerSerde(_FixedIntSerde):
    r"""A 4-byte big-endian signed integer (Samza's ``IntegerSerde``, Java's ``int``).

    >>> IntegerSerde().to_bytes(-2)
    b'\xff\xff\xff\xfe'
    """

    __slots__ = ()
    _name = "IntegerSerde"
    _struct = struct.Struct(">i")


class LongSerde(_FixedIntSerde):
    r"""An 8-byte big-endian signed integer (Samza's ``LongSerde``, Java's ``long``).

    >>> LongSerde().from_bytes(b"\x00" * 7 + b"\x2a")
    42
    """

    __slots__ = ()
    _name = "LongSerde"
    _struct = struct.Struct(">q")


class BytesSerde:
    """Identity on bytes (Samza's ``ByteSerde``)."""

    __slots__ = ()

    def check(self, obj: Any) -> None:
        """Raise ``SerdeError`` unless ``obj`` is bytes-like."""
        self.to_bytes(obj)

    def to_bytes(self, obj: Any) -> bytes:
        """Return ``obj`` itself (``bytearray``/``memoryview`` are copied to ``bytes``)."""
        if isinstance(obj, bytes):
            return obj
        if isinstance(obj, bytearray | memoryview):
            return bytes(obj)
        msg = f"BytesSerde expects bytes, got {type(obj).__name__} {_describe(obj)}"
        raise SerdeError(msg)

    def from_bytes(self, data: bytes) -> bytes:
        """Return ``data`` itself."""
        return data


def _load_avro_schema(path: Path, role: str) -> Any:
    import fastavro

    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        msg = f"AvroSerde cannot read its {role} schema file '{path}': {exc.strerror or exc}"
        raise SerdeError(msg) from exc
    except ValueError as exc:
        msg = f"AvroSerde {role} schema file '{path}' is not valid JSON: {exc}"
        raise SerdeError(msg) from exc
    try:
        return fastavro.parse_schema(raw)
    except Exception as exc:  # fastavro raises several unrelated types for bad schemas
        msg = f"AvroSerde {role} schema file '{path}' is not a valid Avro schema: {exc}"
        raise SerdeError(msg) from exc


class AvroSerde:
    """Avro binary without a container header (fastavro's "schemaless" encoding).

    Writes with ``writer_schema``. Reads data written with ``writer_schema``; when a
    ``reader_schema`` is given, records are resolved into it by Avro's schema-evolution rules
    (added fields take their defaults, removed fields are skipped). Schemas may be given as
    dicts or as paths to ``.avsc`` files.
    """

    __slots__ = ("_reader", "_writer", "_writer_name")

    def __init__(self, writer_schema: dict[str, Any] | Path | str, reader_schema: Any = None) -> None:
        self._writer = self._parse(writer_schema, "writer")
        self._reader = None if reader_schema is None else self._parse(reader_schema, "reader")
        self._writer_name = self._writer.get("name", "?") if isinstance(self._writer, dict) else "?"

    @staticmethod
    def _parse(schema: Any, role: str) -> Any:
        import fastavro

        if isinstance(schema, str | Path):
            return _load_avro_schema(Path(schema), role)
        try:
            return fastavro.parse_schema(schema)
        except Exception as exc:
            msg = f"AvroSerde {role} schema is not a valid Avro schema: {exc}"
            raise SerdeError(msg) from exc

    def to_bytes(self, obj: Any) -> bytes:
        """Encode ``obj`` with the writer schema."""
        import fastavro

        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._writer, obj, strict_allow_default=True)
        except Exception as exc:
            msg = f"AvroSerde cannot write {_describe(obj)} with schema '{self._writer_name}': {exc}"
            raise SerdeError(msg) from exc
        return out.getvalue()

    def from_bytes(self, data: bytes) -> Any:
        """Decode ``data`` written with the writer schema (into the reader schema if any)."""
        import fastavro

        stream = io.BytesIO(data)
        try:
            record = fastavro.schemaless_reader(stream, self._writer, self._reader)
        except Exception as exc:
            msg = f"AvroSerde cannot read {_describe(data)} with schema '{self._writer_name}': {exc}"
            raise SerdeError(msg) from exc
        if stream.tell() != len(data):
            msg = (
                f"AvroSerde read {stream.tell()} of {len(data)} bytes with schema "
                f"'{self._writer_name}': the data was written with another schema"
            )
            raise SerdeError(msg)
        return record


#: Serdes usable by name without a ``serializers.registry`` entry.
BUILTIN_SERDES: dict[str, Callable[[], Serde]] = {
    "string": StringSerde,
    "json": JsonSerde,
    "integer": IntegerSerde,
    "long": LongSerde,
    "bytes": BytesSerde,
}


def build_serde(spec: SerdeSpec) -> Serde:
    """Build the serde a ``serializers.registry.<name>.*`` entry describes.

    The user's own serde class is called without arguments.
    """
    if spec.custom:
        factory = spec.factory
        if factory is None:
            from samzapy.config.user_code import resolve_serde_factory

            key = f"serializers.registry.{spec.name}.class"
            factory = resolve_serde_factory(spec.kind, key, key)
        serde: Serde = factory()
        return serde
    if spec.kind == "avro":
        if spec.schema_path is None:
            msg = f"serde '{spec.name}' is an Avro serde but has no schema: set its schema path"
            raise SerdeError(msg)
        return AvroSerde(spec.schema_path, spec.reader_schema_path)
    factory = BUILTIN_SERDES.get(spec.kind)
    if factory is None:
        kinds = ", ".join(["avro", *BUILTIN_SERDES])
        msg = f"serde '{spec.name}' has unknown kind '{spec.kind}'; expected one of {kinds}"
        raise SerdeError(msg)
    return factory()


class SerdeResolver:
    """Finds the serde of a stream or store by name, building each one once.

    Names registered in ``job.serializers`` win; the built-in names (``string``, ``json``,
    ``integer``, ``long``, ``bytes``) work without registration. A ``None`` name means no
    serde: raw bytes pass through.
    """

    def __init__(self, job: JobConfig) -> None:
        self._job = job
        self._cache: dict[str, Serde] = {}

    def get(self, name: str | None) -> Serde | None:
        """The serde called ``name``, or ``None`` for no serde."""
        if name is None:
            return None
        serde = self._cache.get(name)
        if serde is None:
            serde = self._cache[name] = self._build(name)
        return serde

    def _build(self, name: str) -> Serde:
        spec = self._job.serializers.get(name)
        if spec is not None:
            return build_serde(spec)
        factory = BUILTIN_SERDES.get(name)
        if factory is None:
            known = sorted(set(self._job.serializers) | set(BUILTIN_SERDES))
            msg = (
                f"no serde named '{name}': register it with serializers.registry.{name}.class "
                f"or use one of {', '.join(known)}"
            )
            raise SerdeError(msg)
        return factory()

    def for_stream(self, system_stream: SystemStream) -> tuple[Serde | None, Serde | None]:
        """The (key, message) serdes of a stream, system defaults applied."""
        stream = self._job.stream(system_stream)
        return self.get(stream.key_serde), self.get(stream.msg_serde)

    def for_store(self, store: StoreConfig) -> tuple[Serde | None, Serde | None]:
        """The (key, message) serdes of a store."""
        return self.get(store.key_serde), self.get(store.msg_serde)

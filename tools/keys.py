"""Keys from the command line to store bytes, and store bytes back to printable values.

A key given as ``--string-key``, ``--integer-key``, ``--long-key`` or ``--json-key`` is a
Python object serialised with the store's key serde, exactly as a task's ``put`` would do;
``--hex-key`` gives the stored key bytes themselves (any serde).

>>> parse_keys("integer", "1,-2")
[1, -2]
>>> parse_keys("json", '{"user": "ann", "n": [1, 2]}')
[{'user': 'ann', 'n': [1, 2]}]
>>> render_json({"key": b"\\x01", "value": None})
'{"key":{"$base64":"AQ=="},"value":null}'
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson

from samzapy.config import JobConfig, StoreConfig
from samzapy.errors import SerdeError
from samzapy.serdes import Serde
from samzapy.tools.common import BadInputError

KEY_TYPES = ("string", "integer", "long", "json", "hex")
_INT_BITS = {"integer": 32, "long": 64}


def _parse_int(text: str, kind: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        msg = f"key '{text}' is not an integer (--{kind}-key)"
        raise BadInputError(msg) from None
    bits = _INT_BITS[kind]
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        msg = f"key {value} does not fit in a signed {bits}-bit {kind} (--{kind}-key)"
        raise BadInputError(msg)
    return value


def parse_key(kind: str, text: str) -> Any:
    """One key given on the command line as ``kind`` (one of :data:`KEY_TYPES`)."""
    if kind == "string":
        return text
    if kind in _INT_BITS:
        return _parse_int(text, kind)
    if kind == "json":
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            msg = f"key '{text}' is not valid JSON (--json-key): {exc}"
            raise BadInputError(msg) from None
    if kind == "hex":
        try:
            return bytes.fromhex(text.strip())
        except ValueError:
            msg = f"key '{text}' is not hexadecimal bytes (--hex-key), e.g. ab01"
            raise BadInputError(msg) from None
    msg = f"unknown key type '{kind}': use one of {', '.join(KEY_TYPES)}"
    raise BadInputError(msg)


def parse_keys(kind: str, text: str) -> list[Any]:
    """The keys of one option value: comma-separated (Samza's form), except JSON (one key)."""
    if kind == "json":
        return [parse_key(kind, text)]
    return [parse_key(kind, part) for part in text.split(",")]


def serde_kind(job: JobConfig, name: str | None) -> str | None:
    """The kind (``string``, ``json``, ``avro``, ...) of the serde called ``name``."""
    if name is None:
        return None
    spec = job.serializers.get(name)
    return spec.kind if spec is not None else name


def default_key_type(job: JobConfig, store: StoreConfig) -> str:
    """How ``--from/--to/--prefix`` are read when no ``--key-type`` is given: after the key serde."""
    kind = serde_kind(job, store.key_serde)
    return kind if kind in ("string", "integer", "long", "json") else "hex"


@dataclass(frozen=True)
class KeyCodec:
    """A store's key and message serdes, for reading: objects -> key bytes, bytes -> objects."""

    store: str
    key_serde: Serde | None
    msg_serde: Serde | None
    key_serde_name: str | None = None

    def encode_key(self, kind: str, key: Any) -> bytes:
        """The stored bytes of ``key`` (given as ``kind``).

        Raises:
            BadInputError: the key does not fit the store's key serde.
        """
        if kind == "hex":
            return key
        if self.key_serde is None:
            if isinstance(key, str):
                return key.encode()
            msg = f"store '{self.store}' has no key serde (raw bytes keys): give the key with --hex-key"
            raise BadInputError(msg)
        try:
            return self.key_serde.to_bytes(key)
        except SerdeError as exc:
            msg = (
                f"key {key!r} does not fit the key serde '{self.key_serde_name}' of store "
                f"'{self.store}': {exc}"
            )
            raise BadInputError(msg) from None

    def decode_key(self, data: bytes) -> Any:
        """The key object (the raw bytes when the serde cannot read them)."""
        return _decode(self.key_serde, data)

    def decode_value(self, data: bytes | None) -> Any:
        """The value object, ``None`` for a missing key (raw bytes when undecodable)."""
        return None if data is None else _decode(self.msg_serde, data)


class Undecodable(bytes):
    """Stored bytes the configured serde could not read (printed as such)."""

    error: str = ""


def _decode(serde: Serde | None, data: bytes) -> Any:
    if serde is None:
        return data
    try:
        return serde.from_bytes(data)
    except SerdeError as exc:
        raw = Undecodable(data)
        raw.error = str(exc)
        return raw


def _json_default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        marked = {"$base64": base64.b64encode(bytes(obj)).decode()}
        if isinstance(obj, Undecodable):
            marked["$undecodable"] = obj.error
        return marked
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return {"$repr": repr(obj)}


def render_json(obj: Any) -> str:
    """Compact JSON; bytes (and what JSON cannot hold) become marked objects (module doc)."""
    return orjson.dumps(obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()


def render_text(obj: Any) -> str:
    """A value for humans: JSON where possible; raw bytes as ``b'...'`` (with why, if undecodable)."""
    if isinstance(obj, Undecodable):
        return f"<undecodable {bytes(obj)!r}: {obj.error}>"
    if isinstance(obj, bytes):
        return repr(obj)
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(obj)

r"""A store's keys and values as people see them.

Text they type to key bytes, stored bytes back to objects, JSON and text. One codec for every
surface that shows state to people: the interactive queries (``/stores/...``), the command-line
tools (``read-rocksdb-tool``, ``state-storage-tool``) and state as data (``read_state``'s JSON
columns).

Keys given as text, in one of :data:`KEY_FORMATS`:

* ``string``: the text itself (a string key);
* ``integer`` / ``long``: a signed 32- / 64-bit number;
* ``json``: a JSON document (``["user-1", 1700000000000]`` for a store keyed by tuples);
* ``hex``: the serialised key bytes themselves, bypassing the serde.

Stored bytes decode with the store's serdes; bytes a serde cannot read stay
bytes (:class:`Undecodable`, which says why), and :func:`to_json` marks bytes as
``{"$base64": ...}`` so that nothing is lost in JSON. Query answers keep their own form for
bytes (hex, :func:`jsonable`), which their HTTP clients read.

>>> from samzapy.serdes import JsonSerde, LongSerde
>>> codec = StoreCodec("counts", LongSerde(), JsonSerde())
>>> codec.key_bytes("42", "long").hex()
'000000000000002a'
>>> codec.key_bytes("2a", "hex")
b'*'
>>> codec.decode_value(b'{"n":1}')
{'n': 1}
>>> parse_keys("integer", "1,-2")
[1, -2]
>>> to_json({"key": b"\x01", "value": None})
'{"key":{"$base64":"AQ=="},"value":null}'
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson

from samzapy.config import JobConfig, StoreConfig
from samzapy.errors import BadArgumentError, SerdeError
from samzapy.serdes import BytesSerde, Serde

KEY_FORMATS = ("string", "integer", "long", "json", "hex")
_INT_BITS = {"integer": 32, "long": 64}


class KeyTextError(BadArgumentError):
    """A key given as text is not a key of the store in the format it was given in.

    The command lines exit 2 on it; queries answer 400.
    """


def _clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters for an error message (keys may be huge)."""
    return text if len(text) <= limit else text[:limit] + "..."


def parse_key(fmt: str, text: str, where: str | None = None) -> Any:
    """The key object ``text`` names in format ``fmt`` (bytes for ``hex``).

    ``where`` names how it was given (``--integer-key``, ``format=json``) in the error.

    Raises:
        KeyTextError: ``text`` is not a key in that format.
    """
    how = f" ({where})" if where else ""
    if fmt == "string":
        return text
    if fmt in _INT_BITS:
        return _parse_int(text, fmt, how)
    if fmt == "json":
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            msg = f"key '{_clip(text)}' is not valid JSON{how}: {exc}"
            raise KeyTextError(msg) from None
    if fmt == "hex":
        try:
            return bytes.fromhex(text.strip())
        except ValueError:
            msg = f"key '{_clip(text)}' is not hexadecimal bytes{how}, e.g. ab01"
            raise KeyTextError(msg) from None
    msg = f"unknown key format '{fmt}': use one of {', '.join(KEY_FORMATS)}"
    raise KeyTextError(msg)


def _parse_int(text: str, kind: str, how: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        msg = f"key '{_clip(text)}' is not an integer{how}"
        raise KeyTextError(msg) from None
    bits = _INT_BITS[kind]
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        msg = f"key {value} does not fit in a signed {bits}-bit {kind}{how}"
        raise KeyTextError(msg)
    return value


def parse_keys(fmt: str, text: str, where: str | None = None) -> list[Any]:
    """The keys of one option value: comma-separated (Samza's form), except JSON (one key)."""
    if fmt == "json":
        return [parse_key(fmt, text, where)]
    return [parse_key(fmt, part, where) for part in text.split(",")]


def serde_kind(job: JobConfig, name: str | None) -> str | None:
    """The kind (``string``, ``json``, ``avro``, ...) of the serde called ``name``."""
    if name is None:
        return None
    spec = job.serializers.get(name)
    return spec.kind if spec is not None else name


def default_format(job: JobConfig, store: StoreConfig) -> str:
    """How a key text is read for ``store`` when no format is given.

    After its key serde's kind (``string``, ``integer``, ``long``, ``json``), else ``hex``.
    """
    kind = serde_kind(job, store.key_serde)
    return kind if kind in ("string", "integer", "long", "json") else "hex"


@dataclass(frozen=True)
class StoreCodec:
    """A store's key and message serdes (``None``: raw bytes), for people.

    Key text or objects to stored key bytes, stored bytes to objects. ``store`` and
    ``key_serde_name`` name them in errors.
    """

    store: str
    key_serde: Serde | None
    msg_serde: Serde | None
    key_serde_name: str | None = None

    def key_bytes(self, text: str, fmt: str, where: str | None = None) -> bytes:
        """The stored key bytes that ``text`` names in format ``fmt``.

        Raises:
            KeyTextError: the text is not a key of this store in that format.
        """
        key = parse_key(fmt, text, where)
        if fmt == "json" and isinstance(key, str) and is_raw(self.key_serde):
            key = key.encode()  # a JSON string names the bytes of a raw-bytes key
        elif fmt == "string" and isinstance(self.key_serde, BytesSerde):
            key = key.encode()
        return self.encode_key(fmt, key)

    def encode_key(self, fmt: str, key: Any) -> bytes:
        """The stored bytes of the key object ``key``, serialised as a task's ``put`` would.

        ``key`` is given as ``fmt``; ``hex`` keys are the bytes already.

        Raises:
            KeyTextError: the key does not fit the store's key serde.
        """
        if fmt == "hex":
            return bytes(key)
        if self.key_serde is None:
            if isinstance(key, str):
                return key.encode()
            msg = f"store '{self.store}' has no key serde (raw bytes keys): give the key as hex"
            raise KeyTextError(msg)
        try:
            return self.key_serde.to_bytes(key)
        except SerdeError as exc:
            name = self.key_serde_name or type(self.key_serde).__name__
            msg = f"key {_clip(repr(key))} does not fit the key serde '{name}' of store '{self.store}': {exc}"
            raise KeyTextError(msg) from None

    def decode_key(self, data: bytes) -> Any:
        """The key object (:class:`Undecodable` bytes when the serde cannot read them)."""
        return decode(self.key_serde, data)

    def decode_value(self, data: bytes | None) -> Any:
        """The value object, ``None`` for a missing key (:class:`Undecodable` when unreadable)."""
        return None if data is None else decode(self.msg_serde, data)


def is_raw(serde: Serde | None) -> bool:
    """Whether keys or values of ``serde`` are raw bytes (no serde, or the bytes serde)."""
    return serde is None or isinstance(serde, BytesSerde)


class Undecodable(bytes):
    """Stored bytes the configured serde could not read (shown as such, with ``error``)."""

    error: str = ""


def decode(serde: Serde | None, data: bytes, *, say_why: bool = True) -> Any:
    """``data`` decoded with ``serde``.

    The bytes themselves without one or when it fails; with ``say_why`` those are
    :class:`Undecodable` bytes saying why (``to_json`` shows it), else plain bytes (state as
    data: its raw columns hold the bytes exactly).
    """
    if serde is None:
        return bytes(data)
    try:
        return serde.from_bytes(data)
    except SerdeError as exc:
        if not say_why:
            return bytes(data)
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


def to_json(obj: Any) -> str:
    r"""Compact JSON of a decoded object.

    Bytes become ``{"$base64": ...}`` (with ``"$undecodable"``: why the serde could not read
    them), what JSON cannot hold ``{"$repr": ...}``.

    >>> to_json({"a": b"\x01"}), to_json("x"), to_json((1, 2))
    ('{"a":{"$base64":"AQ=="}}', '"x"', '[1,2]')
    """
    return orjson.dumps(obj, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()


def render_text(obj: Any) -> str:
    r"""A value for humans: JSON where possible; raw bytes as ``b'...'`` (with why, if undecodable).

    >>> render_text({"n": 1}), render_text(b"\x01")
    ('{"n":1}', "b'\\x01'")
    """
    if isinstance(obj, Undecodable):
        return f"<undecodable {bytes(obj)!r}: {obj.error}>"
    if isinstance(obj, bytes):
        return repr(obj)
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(obj)


def jsonable(value: Any) -> Any:
    r"""``value`` with what JSON cannot hold made plain, as query answers show it.

    Bytes as hex, tuples as lists.

    >>> jsonable({"k": (1, b"\x01")})
    {'k': [1, '01']}
    """
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def escaped_text(data: bytes) -> str:
    r"""Stored bytes as readable text: printable ASCII as it is, the rest as ``\xNN``.

    >>> escaped_text(b"et:0\x00wm")
    'et:0\\x00wm'
    """
    return repr(bytes(data))[2:-1]


def readable(data: bytes) -> Any:
    """Stored key bytes as text when they are UTF-8, else the bytes (shown as base64)."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def json_or_bytes(data: bytes) -> Any:
    """The JSON value in ``data``, else the bytes (shown as base64)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return bytes(data)

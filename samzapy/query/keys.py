"""Keys and values of interactive queries: text from a URL to the store's key bytes, and
store bytes back to JSON.

A key in a URL is given in one of three formats (``?format=``):

* ``string`` (the default): the text in the natural form of the store's key serde: a string
  for ``string``, ``json`` (a JSON string) and ``avro``, a decimal number for ``integer`` and
  ``long``, UTF-8 bytes for ``bytes`` (or no serde);
* ``json``: a JSON document given to the key serde (``["user-1", 1700000000000]`` for a store
  keyed by ``(user, window start)`` tuples with the ``json`` serde);
* ``hex``: the serialised key bytes themselves, bypassing the serde.

Answers render values the same way: deserialised by the store's serde and written as JSON
(bytes as hex), or with ``format=hex`` as the raw stored bytes in hex.

>>> codec = KeyCodec(LongSerde(), JsonSerde())
>>> codec.key_bytes("42", "string").hex()
'000000000000002a'
>>> codec.key_bytes("2a", "hex")
b'*'
>>> codec.render_value(b'{"n":1}', "string")
{'n': 1}
"""

from __future__ import annotations

import json
from typing import Any

from samzapy.errors import SamzapyError
from samzapy.http_server import clip
from samzapy.serdes import BytesSerde, IntegerSerde, JsonSerde, LongSerde, Serde

FORMATS = ("string", "json", "hex")


class QueryError(SamzapyError):
    """A query that cannot be answered as asked; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def check_format(value: str | None) -> str:
    """The ``format`` parameter, validated (``string`` when absent).

    >>> check_format(None), check_format("HEX")
    ('string', 'hex')
    """
    fmt = (value or "string").lower()
    if fmt not in FORMATS:
        msg = f"format '{value}' is not known: use one of {', '.join(FORMATS)}"
        raise QueryError(msg)
    return fmt


class KeyCodec:
    """Turns URL text into a store's key bytes and store bytes into JSON, with the store's
    serdes (``None``: raw bytes)."""

    def __init__(self, key_serde: Serde | None, msg_serde: Serde | None) -> None:
        self.key_serde = key_serde
        self.msg_serde = msg_serde

    def key_bytes(self, text: str, fmt: str) -> bytes:
        """The serialised key that ``text`` names in format ``fmt``.

        Raises:
            QueryError: (400) the text is not a key of this store in that format.
        """
        if fmt == "hex":
            try:
                return bytes.fromhex(text)
            except ValueError:
                msg = f"key '{clip(text)}' is not hex (format=hex wants the key bytes as hex digits)"
                raise QueryError(msg) from None
        key = self._key_object(text, fmt)
        if self.key_serde is None:
            return key if isinstance(key, bytes) else str(key).encode()
        try:
            return self.key_serde.to_bytes(key)
        except SamzapyError as exc:
            msg = f"key '{clip(text)}' (format={fmt}) does not fit the store's key serde: {clip(str(exc))}"
            raise QueryError(msg) from exc

    def _key_object(self, text: str, fmt: str) -> Any:
        serde = self.key_serde
        if fmt == "json":
            try:
                value = json.loads(text)
            except ValueError as exc:
                msg = f"key '{clip(text)}' is not JSON (format=json): {clip(str(exc))}"
                raise QueryError(msg) from None
            return value.encode() if isinstance(value, str) and _is_bytes(serde) else value
        if isinstance(serde, IntegerSerde | LongSerde):
            try:
                return int(text)
            except ValueError:
                msg = f"key '{clip(text)}' is not an integer, as the store's key serde needs"
                raise QueryError(msg) from None
        return text.encode() if _is_bytes(serde) else text

    def render_key(self, data: bytes, fmt: str) -> Any:
        """A stored key for a JSON answer: deserialised, or hex with ``format=hex``."""
        return _render(data, self.key_serde, fmt)

    def render_value(self, data: bytes, fmt: str) -> Any:
        """A stored value for a JSON answer: deserialised, or hex with ``format=hex``."""
        return _render(data, self.msg_serde, fmt)


def _is_bytes(serde: Serde | None) -> bool:
    return serde is None or isinstance(serde, BytesSerde)


def _render(data: bytes, serde: Serde | None, fmt: str) -> Any:
    if fmt == "hex" or _is_bytes(serde):
        return data.hex()
    value = serde.from_bytes(data)
    return value if isinstance(serde, JsonSerde) else jsonable(value)


def jsonable(value: Any) -> Any:
    """``value`` with what JSON cannot hold made plain: bytes as hex, tuples as lists.

    >>> jsonable({"k": (1, b"\\x01")})
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

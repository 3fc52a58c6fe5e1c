"""The ``?format=`` of interactive queries.

How a key in a URL names a store's key bytes, and how answers show stored bytes. The key text is
read by the one people-facing codec (:class:`~samzapy.store_codec.StoreCodec`, shared with the
command-line tools and state as data); this module only maps the query formats onto it and makes
its errors HTTP answers.

A key in a URL is given in one of three formats:

* ``string`` (the default): the text in the natural form of the store's key serde: a decimal
  number for ``integer`` and ``long``, UTF-8 bytes for ``bytes`` (or no serde), else a string
  (``json`` and ``avro`` keys that are strings);
* ``json``: a JSON document given to the key serde (``["user-1", 1700000000000]`` for a store
  keyed by ``(user, window start)`` tuples with the ``json`` serde);
* ``hex``: the serialised key bytes themselves, bypassing the serde.

Answers render values the same way: deserialised by the store's serde and written as JSON
(bytes as hex), or with ``format=hex`` as the raw stored bytes in hex.

>>> from samzapy.serdes import JsonSerde, LongSerde
>>> codec = StoreCodec("counts", LongSerde(), JsonSerde())
>>> key_bytes(codec, "42", "string").hex()
'000000000000002a'
>>> key_bytes(codec, "2a", "hex")
b'*'
>>> render(b'{"n":1}', codec.msg_serde, "string")
{'n': 1}
"""

from __future__ import annotations

from typing import Any

from samzapy.errors import SamzapyError
from samzapy.serdes import IntegerSerde, JsonSerde, LongSerde, Serde
from samzapy.store_codec import KeyTextError, StoreCodec, is_raw, jsonable

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


def key_bytes(codec: StoreCodec, text: str, fmt: str) -> bytes:
    """The stored key bytes that ``text`` names in query format ``fmt``.

    Raises:
        QueryError: (400) the text is not a key of this store in that format.
    """
    if fmt == "string" and isinstance(codec.key_serde, IntegerSerde | LongSerde):
        text_format = "integer" if isinstance(codec.key_serde, IntegerSerde) else "long"
    else:
        text_format = fmt
    try:
        return codec.key_bytes(text, text_format, where=f"format={fmt}")
    except KeyTextError as exc:
        raise QueryError(str(exc)) from None


def render(data: bytes, serde: Serde | None, fmt: str) -> Any:
    """Stored bytes for a JSON answer: deserialised (bytes as hex), or hex with ``format=hex``."""
    if fmt == "hex" or is_raw(serde):
        return data.hex()
    assert serde is not None  # is_raw(None) is true
    value = serde.from_bytes(data)
    return value if isinstance(serde, JsonSerde) else jsonable(value)

r"""Order-preserving byte encodings for composite store keys.

Stores order keys by their bytes (as RocksDB does), so the operators encode composite keys
such that byte order equals the order of the parts:

* times (signed milliseconds) as 8 bytes big-endian with the sign bit flipped, so that
  negative times sort before positive ones;
* a user key (arbitrary bytes) *escaped* and terminated, so that it is prefix-free and keeps
  its byte order: ``0x00`` becomes ``0x00 0xff`` and the key ends with ``0x00 0x01``
  (FoundationDB's tuple layer does the same). A key followed by more parts therefore never
  collides with a longer key, and all entries of one key form one contiguous range.

Two layouts are used throughout :mod:`samzapy.operators`:

* key-first ``escape(key) + time`` (windows, join buffers): a range scan per key over times;
* time-first ``time + key`` (timers, expiry and GC indexes): due entries are one range scan
  from the smallest time.

>>> encode_window_key(b"alice", 3_600_000) < encode_window_key(b"alice", 7_200_000)
True
>>> encode_window_key(b"alice", 7_200_000) < encode_window_key(b"alice\x00", 0)
True
>>> decode_window_key(encode_window_key(b"a\x00b", -5))
(b'a\x00b', -5)
"""

from __future__ import annotations

_SIGN = 1 << 63
_MASK = (1 << 64) - 1
_TERMINATOR = b"\x00\x01"

#: The smallest and largest times that :func:`encode_ms` accepts.
MIN_MS = -(1 << 63)
MAX_MS = (1 << 63) - 1


def encode_ms(ms: int) -> bytes:
    """A signed time in ms as 8 bytes that sort like the numbers.

    >>> encode_ms(0).hex(), encode_ms(-1).hex()
    ('8000000000000000', '7fffffffffffffff')
    >>> sorted([5, -3, 0, MIN_MS, MAX_MS], key=encode_ms) == sorted([5, -3, 0, MIN_MS, MAX_MS])
    True
    """
    return ((ms + _SIGN) & _MASK).to_bytes(8, "big")


def decode_ms(data: bytes, offset: int = 0) -> int:
    """The time that :func:`encode_ms` wrote at ``offset`` of ``data``.

    >>> decode_ms(encode_ms(-42))
    -42
    """
    return int.from_bytes(data[offset : offset + 8], "big") - _SIGN


def encode_u64(n: int) -> bytes:
    """An unsigned 64-bit number as 8 bytes big-endian.

    >>> encode_u64(258).hex()
    '0000000000000102'
    """
    return n.to_bytes(8, "big")


def decode_u64(data: bytes, offset: int = 0) -> int:
    """The number that :func:`encode_u64` wrote at ``offset`` of ``data``.

    >>> decode_u64(encode_u64(7))
    7
    """
    return int.from_bytes(data[offset : offset + 8], "big")


def escape(key: bytes) -> bytes:
    r"""``key`` made prefix-free, keeping byte order (see the module docstring).

    >>> escape(b"a\x00b")
    b'a\x00\xffb\x00\x01'
    >>> escape(b"a") < escape(b"a\x00") < escape(b"a\x01") < escape(b"b")
    True
    """
    return key.replace(b"\x00", b"\x00\xff") + _TERMINATOR


def unescape(data: bytes, offset: int = 0) -> tuple[bytes, int]:
    r"""The key that :func:`escape` wrote at ``offset`` and the offset just after it.

    >>> unescape(escape(b"x\x00y") + b"rest")
    (b'x\x00y', 6)
    """
    end = data.index(_TERMINATOR, offset)
    return data[offset:end].replace(b"\x00\xff", b"\x00"), end + 2


def key_prefix_end(escaped: bytes) -> bytes:
    r"""The exclusive upper bound of every store key that starts with ``escaped``.

    ``escaped`` is an output of :func:`escape` (possibly after a namespace prefix).

    >>> key_prefix_end(escape(b"k"))
    b'k\x00\x02'
    """
    return escaped[:-1] + b"\x02"


def prefix_end(prefix: bytes) -> bytes:
    r"""The smallest byte string greater than every string that starts with ``prefix``.

    >>> prefix_end(b"ab"), prefix_end(b"a\xff")
    (b'ac', b'b')

    Raises:
        ValueError: when ``prefix`` is empty or all ``0xff`` (no such bound exists).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        msg = f"prefix {prefix!r} has no upper bound: it is empty or all 0xff bytes"
        raise ValueError(msg)
    return stripped[:-1] + bytes([stripped[-1] + 1])


def encode_window_key(key: bytes, start_ms: int) -> bytes:
    """The key-first store key of the window of ``key`` starting at ``start_ms``.

    Entries sort by (key, start); all windows of one key lie in
    ``[encode_window_key(key, MIN_MS), key_prefix_end(escape(key)))``.

    >>> encode_window_key(b"k", 0).hex()
    '6b00018000000000000000'
    """
    return escape(key) + encode_ms(start_ms)


def decode_window_key(data: bytes, offset: int = 0) -> tuple[bytes, int]:
    """(key, start) of a key written by :func:`encode_window_key` at ``offset``."""
    key, end = unescape(data, offset)
    return key, decode_ms(data, end)


def encode_time_key(time_ms: int, key: bytes) -> bytes:
    """The time-first store key (time, key): entries sort by time, then key bytes.

    >>> encode_time_key(5, b"b") < encode_time_key(6, b"a")
    True
    """
    return encode_ms(time_ms) + key


def decode_time_key(data: bytes, offset: int = 0) -> tuple[int, bytes]:
    """(time, key) of a key written by :func:`encode_time_key` at ``offset``.

    >>> decode_time_key(encode_time_key(-7, b"abc"))
    (-7, b'abc')
    """
    return decode_ms(data, offset), data[offset + 8 :]


def until_inclusive(prefix: bytes, time_ms: int) -> bytes:
    """The exclusive range bound for time-first keys under ``prefix`` with time <= ``time_ms``.

    >>> until_inclusive(b"p", 0) == b"p" + encode_ms(1)
    True
    >>> until_inclusive(b"p", MAX_MS)
    b'q'
    >>> until_inclusive(b"p", MIN_MS - 5) == b"p" + encode_ms(MIN_MS)
    True
    """
    if time_ms >= MAX_MS:
        return prefix_end(prefix)
    return prefix + encode_ms(max(time_ms + 1, MIN_MS))

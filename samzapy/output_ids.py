"""Deterministic output ids: the ``samzapy.id`` header that lets consumers drop duplicates.

One scheme for the whole runtime: the container's collector stamps it on every output, the
test harness (:mod:`samzapy.testing`) and the Spark replay reproduce it, the Spark file sinks
store it as a column, and the operators (windows, joins, dedup) derive their ids from it.

An output re-sent after a crash must carry the same id as its first copy. Ids are derived
only from things a replay reproduces: the task, the input stream and offset, and the output's
sequence number within that input, or, for results that are not tied to one input (window results,
expired join entries), from what the result is about.

>>> output_id("Partition 3", "pageviews", 1234, 0)
'Partition 3:pageviews:1234:0'
>>> window_id(b"alice", 0, 3_600_000)
'w:616c696365:0:3600000'
>>> join_id(b"q1", "imp-7", "click-9")
'j:7131:imp-7:click-9'
>>> id_from_headers([("x", b"1"), (ID_HEADER, b"Partition 0:pageviews:5:1")])
'Partition 0:pageviews:5:1'
"""

from __future__ import annotations

from collections.abc import Iterable

#: The header that carries an output's id (the container stamps it on every output).
ID_HEADER = "samzapy.id"


def output_id(task_name: str, stream: str, input_offset: int | str, sequence: int) -> str:
    """The id of the ``sequence``-th output (from 0) caused by an input.

    The input is the one at ``input_offset`` of ``stream`` in task ``task_name``; the container
    uses this id when an envelope sets none.

    Outputs of ``window()`` have no input: their ``stream`` is ``window`` and their "offset"
    the wall-clock time of the call, unique but not reproducible, so tasks that emit from
    ``window()`` should set ids of their own (as the window operators do).
    """
    return f"{task_name}:{stream}:{input_offset}:{sequence}"


def window_id(key: bytes, start_ms: int, end_ms: int) -> str:
    """The id of the final result of the window ``[start_ms, end_ms)`` of ``key``."""
    return f"w:{key.hex()}:{start_ms}:{end_ms}"


def join_id(key: bytes, left_id: str | None, right_id: str | None) -> str:
    """The id of a stream-stream join result of two records (``None`` for a missing side)."""
    return f"j:{key.hex()}:{left_id or ''}:{right_id or ''}"


def id_header(output: str) -> tuple[str, bytes]:
    """The header pair carrying ``output`` as the id."""
    return (ID_HEADER, output.encode())


def id_from_headers(headers: Iterable[tuple[str, bytes | None]]) -> str | None:
    """The id in ``headers`` (the last ``samzapy.id`` wins), or ``None`` when absent.

    A read record's header may carry a null value (Kafka allows it); a null ``samzapy.id``
    names no id, so it is passed over.

    >>> id_from_headers([(ID_HEADER, b"a"), (ID_HEADER, None)])
    'a'
    """
    found = None
    for name, value in headers:
        if name == ID_HEADER and value is not None:
            found = value.decode()
    return found

"""Reading one partition "to its end", robust to brokers whose end offset undercounts.

Kafka's contract says ListOffsets(latest) is the offset of the next record to be written.
The dev broker (Tansu) reports the base offset of the last record batch plus one instead,
so an end offset is only a lower bound here. "Read to the end" therefore means: keep going
until the position has reached the high watermark of the fetch that brought the last records
(fetch responses carry the true end, on Tansu too), or, when no records came, until the
position has passed the reported end *and* a poll at the current position came back empty.
A read that starts at or past the reported end first fetches the last batch again (from its
first record, which the reported end names) to learn the high watermark. Both rules avoid
the empty poll, which waits its whole timeout (``IDLE_POLL_MS``): the container's fencing
check reads the checkpoint topic this way at every commit, and input waits meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any

from samzapy.kafka.consumer import Consumer
from samzapy.kafka.fast_path_state import install_decoder, log_fast_paths
from samzapy.kafka.offsets import end_offsets
from samzapy.records import OffsetRecord, Record, TopicPartition

#: How long a poll must stay empty before the partition counts as read to its end.
IDLE_POLL_MS = 300


def reader_consumer(
    bootstrap_servers: str | list[str],
    *,
    c_decoder: bool = True,
    raw_records: bool = False,
    native_records: bool = False,
    **overrides: Any,
) -> Consumer:
    """A consumer tuned for bulk reads with manual ``assign()``.

    No group, no auto commit, large fetches, short broker-side waits so that "empty" is learnt
    quickly, and records decoded by the C decoder where it applies
    (:mod:`samzapy.kafka.fast_decode`; ``c_decoder=False`` keeps kafka-python's own, as the
    benchmarks' raw-consume limit does).

    ``raw_records``: the records a poll returns promise only ``offset``, ``key``, ``value``
    and ``headers`` (:class:`~samzapy.kafka.fast_decode.RawRecord`s where the C decoder
    applies, cheaper to build), for readers that need no more, such as restores.
    ``native_records``: the same four attributes on the batch decoder's own record objects
    (not tuples: no ``_replace``, no unpacking), cheaper still: for the Spark bulk restore.
    """
    settings: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "max_partition_fetch_bytes": 8 * 1024 * 1024,
        "fetch_max_bytes": 64 * 1024 * 1024,
        "max_poll_records": 10_000,
    }
    settings.update(overrides)
    log_fast_paths()
    consumer = Consumer(**settings)
    if c_decoder:
        install_decoder(consumer, raw=raw_records, native=native_records)
    return consumer


_key_of, _value_of = attrgetter("key"), attrgetter("value")


def batch_bytes(records: Sequence[OffsetRecord]) -> int:
    """The key and value bytes of ``records`` (a missing key or a tombstone counts 0)."""
    keys = sum(map(len, filter(None, map(_key_of, records))))
    return keys + sum(map(len, filter(None, map(_value_of, records))))


def end_offset(consumer: Consumer, tp: TopicPartition) -> int:
    """The broker's reported end offset of ``tp``: a lower bound of the true end (see module doc)."""
    return consumer.end_offsets([tp])[tp]


def read_partition(
    consumer: Consumer,
    tp: TopicPartition,
    start: int,
    stop: int | None = None,
    idle_poll_ms: int = IDLE_POLL_MS,
) -> Iterator[list[Record]]:
    """Yield the records of ``tp`` from offset ``start`` in batches, in offset order.

    Stops before offset ``stop`` when it is given (records at or past it are not yielded),
    otherwise at the true end of the partition (see module doc). The consumer is assigned
    ``tp`` alone for the duration of the read. A ``raw_records`` consumer's records carry only
    the :class:`~samzapy.records.OffsetRecord` fields and headers.
    """
    consumer.assign([tp])
    reported_end = end_offset(consumer, tp)
    if stop is not None and start >= stop:
        return
    # At or past the reported end, which may miss the rest of the last batch: fetch again from
    # that batch's first record (already read; dropped below). The broker answers at once,
    # with the true end (the high watermark), where an empty poll would wait its whole timeout.
    consumer.seek(tp, reported_end - 1 if 0 < reported_end <= start else start)
    position = start
    while True:
        polled = consumer.poll(timeout_ms=idle_poll_ms, update_offsets=True).get(tp, [])
        if polled and polled[0].offset < position:
            polled = [r for r in polled if r.offset >= position]
            if not polled:
                highwater = consumer.highwater(tp)
                if highwater is not None and position >= highwater:
                    return
                continue
        if not polled:
            if position >= reported_end:
                return
            # Behind the reported end yet nothing came: the fetch was slow, ask again.
            reported_end = end_offset(consumer, tp)
            continue
        if stop is not None and polled[-1].offset >= stop:
            yield [r for r in polled if r.offset < stop]
            return
        position = polled[-1].offset + 1
        yield polled
        if stop is not None and position >= stop:
            return
        # The fetch that brought these records told the partition's end as of then: reaching
        # it is the end, without a last (empty, full-timeout) poll.
        highwater = consumer.highwater(tp)
        if highwater is not None and position >= highwater:
            return


def true_end_offset(consumer: Consumer, tp: TopicPartition) -> int:
    """The offset the next record of ``tp`` will get.

    The reported end, corrected for brokers that undercount it (see module doc) by reading the
    rest of the last batch.

    Costs one fetch of the partition's last batch; ``consumer`` is left assigned to ``tp``.
    """
    end = end_offset(consumer, tp)
    for batch in read_partition(consumer, tp, end):
        end = batch[-1].offset + 1
    return end


def true_end_offsets(consumer: Consumer, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """:func:`true_end_offset` of every partition in ``tps``.

    An empty one (reported end 0: no batch at all) costs no fetch. ``consumer`` is left assigned
    to the last one read, and its metadata may soon know that partition's topic only: ask
    offsets of several topics afterwards with :mod:`samzapy.kafka.offsets`, which copes with
    that.
    """
    reported = end_offsets(consumer, tps)
    ends = {}
    for tp in tps:
        ends[tp] = reported[tp]
        if reported[tp] > 0:
            for batch in read_partition(consumer, tp, reported[tp]):
                ends[tp] = batch[-1].offset + 1
    return ends

"""Bloom filter, deduplicator, output ids and the repartition helper."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.metrics import MetricsGroup  # noqa: E402
from samzapy.operators.dedup import BloomFilter, Deduplicator  # noqa: E402
from samzapy.operators.repartition import Repartitioner, RepartitionError, RepartitionTask  # noqa: E402
from samzapy.output_ids import ID_HEADER, id_from_headers, id_header, output_id  # noqa: E402
from samzapy.streams import SystemStream, SystemStreamPartition  # noqa: E402
from samzapy.task import IncomingMessageEnvelope, OutgoingMessageEnvelope  # noqa: E402


def test_bloom_filter_has_no_false_negatives_and_about_its_false_positive_rate() -> None:
    bf = BloomFilter.for_capacity(5_000, 0.01)
    added = [f"id-{i}".encode() for i in range(5_000)]
    for item in added:
        bf.add(item)
    assert all(item in bf for item in added)
    false_positives = sum(f"other-{i}".encode() in bf for i in range(20_000))
    assert false_positives / 20_000 < 0.02


def test_bloom_filter_round_trips_through_bytes() -> None:
    bf = BloomFilter.for_capacity(100, 0.05)
    bf.add(b"x")
    copy = BloomFilter.from_bytes(bf.to_bytes())
    assert (copy.num_bits, copy.num_hashes, copy.bits) == (bf.num_bits, bf.num_hashes, bf.bits)
    assert b"x" in copy
    with pytest.raises(ValueError, match="corrupt"):
        BloomFilter.from_bytes(bf.to_bytes()[:-1])
    with pytest.raises(ValueError, match="fp_rate"):
        BloomFilter.for_capacity(10, 1.5)


def test_deduplicator_drops_repeats_and_avoids_store_reads_for_new_ids() -> None:
    store = SortedDictStore()
    metrics = MetricsGroup("d")
    dedup = Deduplicator(store, ttl_ms=10_000, expected_items=16_000, fp_rate=0.01, metrics=metrics)
    ids = [f"Partition 0:{i}:0" for i in range(2_000)]
    assert [dedup.seen_before(i, 1_000) for i in ids] == [False] * 2_000
    assert store.gets < 60  # sized 2,000 ids per bucket at 1%: only false positives read
    assert all(dedup.seen_before(i, 2_000) for i in ids)
    assert metrics.snapshot()["duplicates"] == 2_000


def test_deduplicator_never_misses_a_duplicate_with_a_saturated_filter() -> None:
    dedup = Deduplicator(SortedDictStore(), ttl_ms=10_000, expected_items=8, fp_rate=0.5)
    rng = random.Random(3)
    seen: set[str] = set()
    for _ in range(3_000):
        event_id = str(rng.randrange(1_000))
        assert dedup.seen_before(event_id, 5) == (event_id in seen)
        seen.add(event_id)


def test_deduplicator_gc_drops_old_buckets_and_refuses_too_old_ids() -> None:
    store = SortedDictStore()
    metrics = MetricsGroup("d")
    dedup = Deduplicator(store, ttl_ms=100, buckets=4, metrics=metrics)
    assert not dedup.seen_before("a", 0)
    assert not dedup.seen_before("b", 60)
    assert not dedup.seen_before("c", 130)  # horizon 30: bucket [0, 25) is dropped
    assert not any(k.endswith(b"a") for k in store.data)
    assert dedup.seen_before("b", 130)
    assert dedup.seen_before("a", 10)  # older than the horizon: treated as a duplicate
    assert metrics.snapshot()["dedup-too-old"] == 1
    lenient = Deduplicator(SortedDictStore(), ttl_ms=100, too_old_is_duplicate=False)
    lenient.seen_before("x", 500)
    assert not lenient.seen_before("y", 0)


def test_deduplicator_rebuilds_from_the_store_after_a_restart() -> None:
    store = SortedDictStore()
    first = Deduplicator(store, ttl_ms=1_000)
    for i in range(100):
        first.seen_before(f"id{i}", i * 10)
    restarted = Deduplicator(store, ttl_ms=1_000)
    assert restarted.horizon == first.horizon
    assert all(restarted.seen_before(f"id{i}", 1_000) for i in range(100))
    assert not restarted.seen_before("new", 1_000)


def test_deduplicator_answers_match_a_reference_set_with_ttl() -> None:
    rng = random.Random(11)
    store = SortedDictStore()
    dedup = Deduplicator(store, ttl_ms=500, expected_items=200, buckets=5)
    last_seen: dict[str, int] = {}
    now = 0
    for step in range(5_000):
        now += rng.randrange(3)
        event_id = str(rng.randrange(400))
        expected = event_id in last_seen and last_seen[event_id] >= now - 500 + 100
        got = dedup.seen_before(event_id, now)
        if expected:  # retained for at least the ttl (buckets of 100 ms may keep it longer)
            assert got, (step, event_id)
        if not got:
            last_seen[event_id] = now
        if step % 1000 == 0:
            dedup = Deduplicator(store, ttl_ms=500, expected_items=200, buckets=5)


def test_output_ids_and_headers() -> None:
    assert output_id("Partition 3", "pageviews", 1234, 0) == "Partition 3:pageviews:1234:0"
    assert id_header("x") == (ID_HEADER, b"x") == ("samzapy.id", b"x")
    assert id_from_headers([]) is None


class Collector:
    def __init__(self) -> None:
        self.sent: list[OutgoingMessageEnvelope] = []

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        self.sent.append(envelope)


def envelope(message: Any) -> IncomingMessageEnvelope:
    ssp = SystemStreamPartition("kafka", "pageviews", 2)
    return IncomingMessageEnvelope(ssp, 7, b"page-1", message, headers=[("samzapy.id", b"old"), ("h", b"v")])


def test_repartitioner_sends_re_keyed_messages_without_the_old_id() -> None:
    collector = Collector()
    Repartitioner("kafka.by-user", lambda m: m["user"]).send(collector, envelope({"user": "u1"}))
    [out] = collector.sent
    assert (out.system_stream, out.key, out.message, out.headers, out.id) == (
        SystemStream("kafka", "by-user"),
        "u1",
        {"user": "u1"},
        [("h", b"v")],
        None,
    )
    with pytest.raises(RepartitionError, match=r"kafka.pageviews.2 offset 7 .* returned None"):
        Repartitioner("kafka.by-user", lambda m: None).send(collector, envelope({}))


def test_repartition_task_uses_its_key_function_and_requires_an_output() -> None:
    class ByUser(RepartitionTask):
        output_stream = "kafka.by-user"

        def key_of(self, message: Any) -> Any:
            return message["user"]

    collector = Collector()
    ByUser().process(envelope({"user": "u9"}), collector, None)  # type: ignore[arg-type]
    assert collector.sent[0].key == "u9"

    class NoOutput(RepartitionTask):
        pass

    with pytest.raises(RepartitionError, match="must set output_stream"):
        NoOutput()


def test_blocks_of_different_kinds_share_one_store_and_namespace() -> None:
    from samzapy.operators import (
        JoinRegistry,
        TimerService,
        TumblingWindows,
        Watermark,
        WindowedAggregation,
        count,
    )

    store = SortedDictStore()
    wm = Watermark(store)
    timers = TimerService(store, wm)
    windows = WindowedAggregation(store, TumblingWindows(10), count(), wm)
    registry = JoinRegistry(store, retention_ms=100)
    dedup = Deduplicator(store, ttl_ms=100)
    for t in range(0, 30, 3):
        wm.observe(t)
        windows.add(b"k", t, None)
        timers.set_event_timer(t + 5, b"k")
        assert registry.try_register(f"id{t}", t)
        assert not dedup.seen_before(f"id{t}", t)
    assert [r.value for r in windows.close_due()] == [4, 3]
    assert [t.time_ms for t in timers.fire_due(0)] == [5, 8, 11, 14, 17, 20, 23, 26]
    assert registry.is_registered("id3") and dedup.seen_before("id3", 27)
    assert Watermark(store).current == 27

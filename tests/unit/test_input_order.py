"""task.input.order=timestamp: a task's inputs are taken in the Spark replay's order.

The container's real ``Inputs`` and ``TimestampOrder`` run over an in-memory consumer on the
test driver's ``MemoryBroker`` whose polls return a backlog the way a broker may (a whole
partition first, random slices), and what they hand out is compared, record for record, with
``merge_in_order``, the merge the Spark replay runs (samzapy/spark/replay/partition.py).
"""

from __future__ import annotations

import doctest
import random
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pytest

from samzapy.config import load_config, parse_job_config
from samzapy.container import input_order
from samzapy.container.input_order import (
    TimestampOrder,
    input_source,
    merge_in_order,
    order_key,
    stream_indexes,
)
from samzapy.container.inputs import InputPartition, Inputs
from samzapy.records import TopicPartition
from samzapy.streams import SystemStream, SystemStreamPartition
from samzapy.testing.broker import BrokerRecord, MemoryBroker

PROFILES, SETTINGS = SystemStream("kafka", "profiles"), SystemStream("kafka", "settings")


class MemoryConsumer:
    """The consumer calls ``Inputs`` makes, over a ``MemoryBroker``; each poll returns a
    slice of the assigned partitions' backlog chosen by ``pick`` (a broker's fetches are not
    in timestamp order)."""

    def __init__(self, broker: MemoryBroker, rng: random.Random, whole_partition_first: bool = False) -> None:
        self.broker = broker
        self.rng = rng
        self.whole_partition_first = whole_partition_first
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.ever_unassigned: set[TopicPartition] = set()

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        wanted = set(tps)
        self.ever_unassigned |= set(self.positions) - wanted
        self.positions = {tp: self.positions.get(tp, 0) for tp in wanted}
        self.paused &= wanted

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def highwater(self, tp: TopicPartition) -> int | None:
        if tp not in self.positions:  # as kafka-python: IllegalStateError
            raise RuntimeError(f"{tp} is not assigned")
        return self.broker.end_offset(tp)

    def poll(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[BrokerRecord]]:
        ready = sorted(
            tp
            for tp, at in self.positions.items()
            if tp not in self.paused and at < self.broker.end_offset(tp)
        )
        if not ready:
            return {}
        chosen = (
            ready[:1]
            if self.whole_partition_first
            else self.rng.sample(ready, self.rng.randint(1, len(ready)))
        )
        polled = {}
        for tp in chosen:
            most = max_records if self.whole_partition_first else self.rng.randint(1, 40)
            records = [r for batch in self.broker.read(tp, self.positions[tp]) for r in batch][:most]
            self.positions[tp] = records[-1].offset + 1
            polled[tp] = records
        return polled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def task(partition: int) -> Any:
    """A task as ``Inputs`` and ``TimestampOrder`` see it: a name and its next offsets."""
    return SimpleNamespace(task_name=f"Partition {partition}", partition=partition, offsets={})


def inputs_over(
    broker: MemoryBroker,
    consumer: MemoryConsumer,
    tasks: list[Any],
    streams: list[SystemStream],
    *,
    bootstrap: frozenset[SystemStream] = frozenset(),
    priority: dict[SystemStream, int] | None = None,
) -> Inputs:
    """``Inputs`` over every (task, stream), from offset 0, ends as the broker has them now."""
    parts = []
    for t in tasks:
        for s in streams:
            tp = TopicPartition(s.stream, t.partition)
            ssp = SystemStreamPartition(s.system, s.stream, t.partition)
            end = broker.end_offset(tp)
            parts.append(InputPartition(ssp, tp, t, (priority or {}).get(s, 0), s in bootstrap, 0, end))
    return Inputs(consumer, parts)  # type: ignore[arg-type]


def drain(
    source: Any, inputs: Inputs, *, rounds: int = 10_000, max_records: int = 50
) -> list[tuple[str, int, int]]:
    """Poll and "process" (advance the tasks' offsets) until every input is read to its end
    at start; ``(topic, partition, offset)`` in the order handed out."""
    seen: list[tuple[str, int, int]] = []
    for _ in range(rounds):
        for part, records in source.poll(0, max_records):
            seen += [(r.topic, r.partition, r.offset) for r in records]
            part.task.offsets[part.ssp] = records[-1].offset + 1
        position = {p.ssp: p.task.offsets.get(p.ssp, 0) for p in inputs.partitions.values()}
        inputs.note_progress(position)
        inputs.lag(position)  # as the progress line asks, held partitions included
        if inputs.all_caught_up():
            return seen
    raise AssertionError(f"inputs not read to their end after {rounds} polls ({len(seen)} records)")


def replay_order(
    broker: MemoryBroker,
    partition: int,
    streams: list[SystemStream],
    *,
    bootstrap: frozenset[SystemStream] = frozenset(),
    priority: dict[SystemStream, int] | None = None,
) -> list[tuple[str, int, int]]:
    """The order the Spark replay merges one task's history in."""
    sources = [
        (
            (int(s in bootstrap), (priority or {}).get(s, 0), i, partition),
            broker.records(s.stream, partition),
        )
        for i, s in enumerate(streams)
    ]
    return [(r.topic, r.partition, r.offset) for r in merge_in_order(sources)]


def interleaved_history(broker: MemoryBroker, rng: random.Random, partitions: int, count: int) -> None:
    """Profiles and settings with interleaved timestamps: ties across the streams, and a few
    records older than the one before them in their partition."""
    for stream in (PROFILES, SETTINGS):
        for p in range(partitions):
            ts = 1_000
            for i in range(count):
                ts += rng.choice((0, 1, 2, 5))
                stamp = ts - 7 if rng.random() < 0.05 else ts
                broker.append(stream.stream, p, f"user-{i % 7}".encode(), b"v", timestamp=stamp)


def by_task(seen: list[tuple[str, int, int]], partition: int) -> list[tuple[str, int, int]]:
    return [r for r in seen if r[1] == partition]


@pytest.mark.parametrize("whole_partition_first", [True, False], ids=["partition-at-a-time", "random-slices"])
def test_a_backlog_is_taken_in_the_replays_order_whatever_the_polls_return(
    whole_partition_first: bool,
) -> None:
    rng = random.Random(29)
    broker = MemoryBroker()
    interleaved_history(broker, rng, partitions=2, count=400)
    tasks = [task(0), task(1)]
    inputs = inputs_over(
        broker, MemoryConsumer(broker, rng, whole_partition_first), tasks, [PROFILES, SETTINGS]
    )
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), 0, exit_at_end=True)
    seen = drain(order, inputs)
    assert len(seen) == len(set(seen)) == 1_600
    for t in tasks:
        assert by_task(seen, t.partition) == replay_order(broker, t.partition, [PROFILES, SETTINGS])


def test_arrival_order_differs_from_the_replay_over_the_same_backlog() -> None:
    """What task.input.order=arrival gives (the polls' order): the case timestamp order fixes."""
    rng = random.Random(29)
    broker = MemoryBroker()
    interleaved_history(broker, rng, partitions=1, count=400)
    inputs = inputs_over(broker, MemoryConsumer(broker, rng, True), [task(0)], [PROFILES, SETTINGS])
    seen = drain(inputs, inputs)
    assert sorted(seen) == sorted(replay_order(broker, 0, [PROFILES, SETTINGS]))
    assert seen != replay_order(broker, 0, [PROFILES, SETTINGS])


def test_bootstrap_streams_come_first_then_priority_then_timestamp() -> None:
    rng = random.Random(7)
    broker = MemoryBroker()
    views, urgent = SystemStream("kafka", "views"), SystemStream("kafka", "urgent")
    streams = [views, urgent, PROFILES]
    for i in range(60):  # the bootstrap stream's records are the newest of all
        broker.append("views", 0, None, b"v", timestamp=1_000 + 3 * i)
        broker.append("urgent", 0, None, b"u", timestamp=1_001 + 3 * i)
        broker.append("profiles", 0, None, b"p", timestamp=9_000 + i)
    boot, prio = frozenset({PROFILES}), {urgent: 5}
    inputs = inputs_over(
        broker, MemoryConsumer(broker, rng), [task(0)], streams, bootstrap=boot, priority=prio
    )
    order = TimestampOrder(inputs, stream_indexes(streams), 0, exit_at_end=True)
    seen = drain(order, inputs)
    assert seen == replay_order(broker, 0, streams, bootstrap=boot, priority=prio)
    assert [t for t, _, _ in seen] == ["profiles"] * 60 + ["urgent"] * 60 + ["views"] * 60


def test_a_task_waits_for_an_input_whose_next_records_are_on_the_broker() -> None:
    broker = MemoryBroker()
    for i in range(5):
        broker.append("profiles", 0, None, b"p", timestamp=10 + 2 * i)
        broker.append("settings", 0, None, b"s", timestamp=11 + 2 * i)
    consumer = MemoryConsumer(broker, random.Random(1), whole_partition_first=True)
    inputs = inputs_over(broker, consumer, [task(0)], [PROFILES, SETTINGS])
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), 0)
    assert order.poll(0, 100) == []  # profiles came; settings are below their end at start
    assert order.buffered == 5
    runs = order.poll(0, 100)  # settings came: everything, interleaved
    assert [(p.ssp.stream, [r.offset for r in rs]) for p, rs in runs] == [
        (stream, [i]) for i in range(5) for stream in ("profiles", "settings")
    ]


def test_a_caught_up_input_is_waited_for_up_to_max_idle_ms_then_the_others_go_on() -> None:
    broker = MemoryBroker({"profiles": 1, "settings": 1})
    for i in range(3):
        broker.append("profiles", 0, None, b"p", timestamp=10 + i)
    clock = Clock()
    consumer = MemoryConsumer(broker, random.Random(1), whole_partition_first=True)
    inputs = inputs_over(broker, consumer, [task(0)], [PROFILES, SETTINGS])
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), 500, clock=clock)
    assert order.poll(0, 100) == []  # settings is empty and caught up: wait for a producer
    clock.now += 0.499
    assert order.poll(0, 100) == []
    broker.append("settings", 0, None, b"s", timestamp=11)  # a producer sent one in time
    runs = order.poll(0, 100)
    assert [(p.ssp.stream, [r.offset for r in rs]) for p, rs in runs] == [
        ("profiles", [0, 1]),
        ("settings", [0]),
    ]  # profiles' offset 2 (timestamp 12) waits again for settings, which is empty
    assert order.poll(0, 100) == []
    clock.now += 0.5
    assert [(p.ssp.stream, [r.offset for r in rs]) for p, rs in order.poll(0, 100)] == [("profiles", [2])]


@pytest.mark.parametrize(
    ("max_idle_ms", "exit_at_end"), [(None, False), (60_000, True)], ids=["-1", "exit-at-end"]
)
def test_no_wait_for_a_caught_up_input_when_disabled_or_at_the_end_of_input(
    max_idle_ms: int | None, exit_at_end: bool
) -> None:
    broker = MemoryBroker({"profiles": 1, "settings": 1})
    for i in range(3):
        broker.append("profiles", 0, None, b"p", timestamp=10 + i)
    consumer = MemoryConsumer(broker, random.Random(1), whole_partition_first=True)
    inputs = inputs_over(broker, consumer, [task(0)], [PROFILES, SETTINGS])
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), max_idle_ms, exit_at_end=exit_at_end)
    assert [(p.ssp.stream, [r.offset for r in rs]) for p, rs in order.poll(0, 100)] == [
        ("profiles", [0, 1, 2])
    ]


@pytest.mark.parametrize("exit_at_end", [True, False])
def test_a_partition_far_ahead_is_held_out_and_comes_back_where_its_buffer_ends(
    monkeypatch, exit_at_end
) -> None:
    monkeypatch.setattr(input_order, "BUFFER_LIMIT", 20)
    broker = MemoryBroker()
    for i in range(200):  # every profile is newer than every setting
        broker.append("profiles", 0, None, b"p", timestamp=10_000 + i)
        broker.append("settings", 0, None, b"s", timestamp=10 + i)
    consumer = MemoryConsumer(broker, random.Random(3))
    inputs = inputs_over(broker, consumer, [task(0)], [PROFILES, SETTINGS])
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), 0, exit_at_end=exit_at_end)
    seen = drain(order, inputs, max_records=7)
    assert TopicPartition("profiles", 0) in consumer.ever_unassigned
    assert seen == replay_order(broker, 0, [PROFILES, SETTINGS])


def test_records_buffered_when_the_inputs_are_sought_again_come_again_once() -> None:
    rng = random.Random(5)
    broker = MemoryBroker()
    interleaved_history(broker, rng, partitions=1, count=100)
    t = task(0)
    inputs = inputs_over(broker, MemoryConsumer(broker, rng), [t], [PROFILES, SETTINGS])
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), 0, exit_at_end=True)
    seen: list[tuple[str, int, int]] = []
    while len(seen) < 60 or order.buffered == 0:  # part processed, part buffered
        for part, records in order.poll(0, 10):
            seen += [(r.topic, r.partition, r.offset) for r in records]
            t.offsets[part.ssp] = records[-1].offset + 1
    inputs.drop_tasks([t], dict(t.offsets))  # e.g. a task came or went: every partition sought again
    seen += drain(order, inputs)
    assert seen == replay_order(broker, 0, [PROFILES, SETTINGS])


def test_order_key_ranks_bootstrap_priority_timestamp_then_stream_partition_offset() -> None:
    keys = [
        order_key(True, 0, 50, 1, 0, 0),
        order_key(False, 1, 99, 1, 0, 0),
        order_key(False, 0, 10, 1, 0, 5),
        order_key(False, 0, 20, 0, 0, 9),
        order_key(False, 0, 20, 1, 0, 1),
        order_key(False, 0, 20, 1, 1, 0),
    ]
    assert sorted(keys) == keys


def test_records_gone_from_below_the_end_at_start_are_waited_for_30_s_then_warned_about(caplog) -> None:
    broker = MemoryBroker({"profiles": 1, "settings": 1})
    for i in range(3):
        broker.append("profiles", 0, None, b"p", timestamp=10 + i)
    clock = Clock()
    consumer = MemoryConsumer(broker, random.Random(1), whole_partition_first=True)
    inputs = inputs_over(broker, consumer, [task(0)], [PROFILES, SETTINGS])
    inputs.partitions[TopicPartition("settings", 0)].start_end = 4  # had 4 records, now gone
    order = TimestampOrder(inputs, stream_indexes([PROFILES, SETTINGS]), 0, clock=clock)
    assert order.poll(0, 100) == []
    clock.now += input_order.STALL_S - 0.1
    assert order.poll(0, 100) == []
    clock.now += 0.1
    assert [(p.ssp.stream, [r.offset for r in rs]) for p, rs in order.poll(0, 100)] == [
        ("profiles", [0, 1, 2])
    ]
    assert "settings" in caplog.text and "deleted by retention?" in caplog.text


def test_the_modules_doctests_pass() -> None:
    result = doctest.testmod(input_order)
    assert result.attempted > 0 and result.failed == 0


JOB = """job.name=j
task.class=samzapy.jobs.profile_settings_join:ProfileSettingsJoinTask
task.inputs=kafka.profiles,kafka.settings
"""


@pytest.mark.parametrize(
    ("lines", "order", "idle", "source"),
    [
        ("", "timestamp", 0, TimestampOrder),
        ("task.input.order=arrival\n", "arrival", 0, Inputs),
        ("task.input.order=TIMESTAMP\ntask.max.idle.ms=-1\n", "timestamp", None, TimestampOrder),
        ("task.max.idle.ms=250\n", "timestamp", 250, TimestampOrder),
    ],
)
def test_the_keys_choose_what_the_run_loop_polls(tmp_path, lines, order, idle, source) -> None:
    file = tmp_path / "job.properties"
    file.write_text(JOB + lines)
    job = parse_job_config(load_config(file))
    assert (job.input_order, job.max_idle_ms) == (order, idle)
    inputs = inputs_over(
        MemoryBroker(), MemoryConsumer(MemoryBroker(), random.Random(1)), [task(0)], [PROFILES]
    )
    assert type(input_source(job, inputs, exit_at_end=False)) is source

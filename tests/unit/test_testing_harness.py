"""The test driver (samzapy.testing) runs the real runtime over in-memory clients: commit and
checkpoint, crash and restart, the error policy, the stream-time helpers, shared brokers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from samzapy import AsyncStreamTask, InitableTask, OutgoingMessageEnvelope, StreamTask, WindowableTask
from samzapy.config import load_config
from samzapy.container.error_policy import ERROR_HEADER
from samzapy.jobs.pageview_counter import PageViewCounterTask
from samzapy.kafka.partitioner import partition_for_key
from samzapy.streams import SystemStreamPartition
from samzapy.testing import HarnessError, MemoryBroker, TaskHarness

SERDES = {"systems.kafka.samza.key.serde": "string", "systems.kafka.samza.msg.serde": "json"}
COUNTS = {
    "stores.counts.factory": "rocksdb",
    "stores.counts.changelog": "kafka.counts-changelog",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "long",
}
CONFIG = {"task.inputs": "kafka.words", **SERDES, **COUNTS}
WORDS = SystemStreamPartition("kafka", "words", 0)


class CountTask(StreamTask, InitableTask):
    """Counts words; sends each new count to kafka.counts; ``commit`` and ``stop`` ask the
    coordinator; ``boom`` raises."""

    def init(self, context: Any) -> None:
        self.counts = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = envelope.message["word"]
        if word == "boom":
            raise ValueError("no booms")
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        collector.send(OutgoingMessageEnvelope("kafka.counts", key=word, message={"count": count}))
        if word == "commit":
            coordinator.commit()
        if word == "stop":
            coordinator.shutdown()


class TickTask(StreamTask, WindowableTask):
    """Sends one tick per window() call."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        """Nothing per message."""

    def window(self, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope("kafka.ticks", key="t", message={"tick": True}))


def words(h: TaskHarness, *items: str) -> None:
    for word in items:
        h.send("kafka.words", word, {"word": word})


def counts(h: TaskHarness) -> dict[str, int]:
    return dict(h.stores["counts"].all())


@pytest.fixture
def harness():  # type: ignore[no-untyped-def]
    made: list[TaskHarness] = []

    def make(config: dict[str, str] | None = None, task: Any = CountTask, **kwargs: Any) -> TaskHarness:
        made.append(TaskHarness(task, {**CONFIG, **(config or {})}, **kwargs))
        return made[-1]

    yield make
    for h in made:
        h.close()


def test_commit_writes_the_checkpoint_with_input_and_changelog_offsets(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness()
    assert h.checkpoint is None
    words(h, "a", "b", "a")
    h.commit()
    checkpoint = h.checkpoint
    assert checkpoint is not None
    assert checkpoint.input_offsets == {WORDS: 3}
    assert checkpoint.changelog_offsets == {"counts": 1}  # coalesced: a=2, b=1
    assert h.changelogs["counts"].latest() == {b"a": (2).to_bytes(8, "big"), b"b": (1).to_bytes(8, "big")}
    assert h.producer.unacknowledged == []


def test_a_crash_loses_what_was_not_committed_and_a_restart_replays_it(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness({"systems.kafka.samza.offset.default": "oldest"})
    words(h, "a", "b")
    h.commit()
    words(h, "a", "c")
    h.crash()
    assert [r.key for r in h.records("kafka.counts")] == [b"a", b"b"]  # the two unacknowledged: lost
    assert h.changelogs["counts"].records == [(b"a", (1).to_bytes(8, "big")), (b"b", (1).to_bytes(8, "big"))]
    words(h, "d")  # waits while the task is down
    assert h.state == "crashed"
    h.restart()
    assert h.generation == 2
    assert counts(h) == {"a": 2, "b": 1, "c": 1, "d": 1}
    assert [r.key for r in h.records("kafka.counts")] == [b"a", b"b", b"a", b"c", b"d"]


def test_unacknowledged_writes_that_landed_are_trimmed_by_the_restore(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness({"stores.counts.object.cache.size": "0", "stores.counts.changelog.coalesce": "false"})
    words(h, "a")
    h.commit()
    words(h, "a", "b")
    h.crash("land")
    assert len(h.changelogs["counts"].records) == 3  # landed beyond the checkpoint
    h.restart()
    assert h.registry.group("store.counts.Partition 0").counter("trimmed-messages").value == 2
    assert counts(h) == {"a": 2, "b": 1}  # the input after the checkpoint was replayed once
    assert {k: int.from_bytes(v, "big") for k, v in h.changelogs["counts"].latest().items()} == {
        b"a": 2,
        b"b": 1,
    }


def test_without_a_checkpoint_a_restart_starts_where_samza_offset_default_says(harness) -> None:  # type: ignore[no-untyped-def]
    upcoming = harness()
    words(upcoming, "a")
    upcoming.crash()
    upcoming.restart()
    assert counts(upcoming) == {}  # as a job: no checkpoint, 'upcoming' starts after what was sent
    oldest = harness({"systems.kafka.samza.offset.default": "oldest"})
    words(oldest, "a")
    oldest.crash()
    oldest.restart()
    assert counts(oldest) == {"a": 1}


def test_a_requested_commit_is_done_after_the_call_and_a_shutdown_stops_the_task(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness()
    words(h, "a", "commit")
    assert h.checkpoint is not None and h.checkpoint.input_offsets == {WORDS: 2}
    assert h.coordinator.commit_requested is False
    words(h, "stop", "b")
    assert h.state == "stopped"
    assert h.checkpoint.input_offsets == {WORDS: 3}  # the final commit, "b" not processed
    with pytest.raises(HarnessError, match="the task is stopped; restart"):
        h.window()
    h.restart()
    assert counts(h) == {"a": 1, "commit": 1, "stop": 1, "b": 1}


def test_a_failed_message_stops_the_task_and_raises_its_own_exception(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness()
    words(h, "a")
    with pytest.raises(ValueError, match="no booms") as info:
        words(h, "boom")
    assert "stream 'kafka.words' partition 0 offset 1" in info.value.__notes__[0]
    assert h.state == "failed" and h.checkpoint is not None
    assert h.checkpoint.input_offsets == {WORDS: 1}  # what came before was committed
    words(h, "b")  # waits
    with pytest.raises(ValueError, match="no booms"):
        h.restart()  # the same message fails again
    assert counts(h) == {"a": 1}


def test_a_bad_message_goes_to_the_dead_letter_stream(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness({"task.dead.letter.stream": "kafka.dlq"})
    h.send_raw("kafka.words", b"x", b"{not json")
    words(h, "a")
    [dead] = h.records("kafka.dlq")
    assert (dead.key, dead.value) == (b"x", b"{not json")
    assert dict(dead.headers)[ERROR_HEADER].startswith(b"could not deserialise")
    assert counts(h) == {"a": 1}
    assert h.metrics.counter("dead-lettered").value == 1


def test_the_wall_clock_drives_window_and_commit_on_their_schedules(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness({"task.window.ms": "100", "task.commit.ms": "250"}, task=TickTask, wall_clock_ms=1000)
    h.advance_wall_clock(99)
    assert h.outputs == []
    h.advance_wall_clock(1)  # 1100: a window() call
    assert h.checkpoint is None
    h.advance_wall_clock(150)  # 1250: a window() call, and 250 ms since the start: a commit
    assert h.checkpoint is not None
    h.advance_wall_clock(100)  # 1350: a window() call
    assert [o.id for o in h.outputs] == [f"Partition 0:window:{t}:0" for t in (1100, 1250, 1350)]
    assert [r.id for r in h.records("kafka.ticks")] == [o.id for o in h.outputs]
    assert h.producer.acked_offset("ticks", 0) == 1  # the third tick is not committed yet


def test_advancing_event_time_closes_the_windows_it_passes() -> None:
    config = load_config(
        Path(__file__).parents[2] / "config" / "pageview-counter.properties",
        ["watermark.upstream.tasks=0", "window.size.ms=100", "window.allowed.lateness.ms=0"],
    )
    h = TaskHarness(PageViewCounterTask, config)

    def view(n: int, ts: int) -> None:
        h.send("kafka.pageviews-by-user", "u1", {"view_id": f"v{n}", "user_id": "u1", "page": "/", "ts": ts})

    view(0, 10)
    view(1, 50)
    h.window()
    assert h.outputs == []  # the watermark is at 50: [0, 100) is open
    h.advance_event_time(120)  # the control record moves the watermark: the window is emitted
    assert [(o.message["window_start"], o.message["count"]) for o in h.outputs] == [(0, 2)]
    view(2, 130)
    h.end_of_stream()
    assert [(o.message["window_start"], o.message["count"]) for o in h.outputs] == [(0, 2), (100, 1)]
    h.close()


def test_harnesses_sharing_a_broker_read_each_others_outputs(harness) -> None:  # type: ignore[no-untyped-def]
    broker = MemoryBroker()
    upstream = harness(broker=broker)
    downstream = harness(
        config={"task.inputs": "kafka.counts", "systems.kafka.samza.offset.default": "oldest"},
        broker=broker,
        loopback=True,
        task=_CountKeys,
    )
    words(upstream, "a", "b", "a")
    assert counts(downstream) == {}  # outputs are read when it processes
    assert downstream.process_available() == 3
    assert counts(downstream) == {"a": 2, "b": 1}


class _CountKeys(StreamTask, InitableTask):
    def init(self, context: Any) -> None:
        self.counts = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.counts.put(envelope.key, (self.counts.get(envelope.key) or 0) + 1)


def test_crash_points_are_named_and_checked(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness()
    with pytest.raises(ValueError, match="unknown crash point 'after-lunch'"):
        h.crash_at("after-lunch")
    h.crash_at("after-output-send", after=2)
    words(h, "a", "b", "c")
    assert h.state == "crashed"
    with pytest.raises(HarnessError, match="commit\\(\\): the task is crashed; restart"):
        h.commit()
    assert [r.key for r in h.input_broker.records("words")] == [b"a", b"b", b"c"]


class AsyncCountTask(AsyncStreamTask, InitableTask):
    """Counts words after an await; ``slow`` words wait longer, so later keys finish first."""

    def init(self, context: Any) -> None:
        self.counts = context.get_store("counts")

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = envelope.message["word"]
        await asyncio.sleep(0.01 if word == "slow" else 0)
        if word == "boom":
            raise ValueError("no booms")
        self.counts.put(word, (self.counts.get(word) or 0) + 1)
        collector.send(OutgoingMessageEnvelope("kafka.counts", key=word, message={"word": word}))


def test_an_async_task_runs_in_the_async_runner_and_survives_a_crash(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness(
        {"task.max.concurrency": "4", "systems.kafka.samza.offset.default": "oldest"}, task=AsyncCountTask
    )
    assert "queue-capacity" in h.metrics.gauge_names()  # the container's async runner runs it
    words(h, "slow", "a", "b")  # sent one at a time: each call drains
    h.commit()
    assert h.checkpoint is not None and h.checkpoint.input_offsets == {WORDS: 3}
    h.send_raw("kafka.words", b"slow", b'{"word": "slow"}')
    words(h, "a")
    h.crash()
    h.restart()
    assert counts(h) == {"slow": 2, "a": 2, "b": 1}
    with pytest.raises(ValueError, match="no booms"):
        words(h, "boom")  # the error policy, once task.retry.max.attempts (0 here) are used up
    assert h.state == "failed"


def test_keyed_outputs_spread_over_the_partitions_the_broker_gives_their_topic(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness(broker=MemoryBroker(default_partitions=4))  # as a job of four tasks
    words(h, *(f"w{i}" for i in range(12)))
    by_partition = {r.partition for r in h.records("kafka.counts")}
    assert h.broker.partition_count("counts") == 4
    assert len(by_partition) > 1
    assert all(r.partition == partition_for_key(r.key, 4) for r in h.records("kafka.counts"))


def test_a_crash_point_does_not_fire_inside_a_restarts_restore(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness(
        {
            "stores.counts.object.cache.size": "0",
            "stores.counts.changelog.coalesce": "false",
            "systems.kafka.samza.offset.default": "oldest",
        }
    )
    words(h, "a")
    h.commit()
    words(h, "a", "b")
    h.crash("land")
    h.crash_at("after-changelog-send")
    h.restart()  # the restore's trim writes two records: not counted; the replay of "a" crashes
    assert h.state == "crashed" and h.generation == 2
    h.restart()
    assert counts(h) == {"a": 2, "b": 1}

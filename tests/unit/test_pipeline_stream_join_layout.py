"""The pipeline's stream-stream join in store layout 2 (the default) against layout 1
(``pipeline.join.state.layout=1``): the same outputs (ids, keys, value bytes, in order) for
every kind, with and without join-once, also across kill -9 rounds (stores restored from their
changelogs); the same open records and decisions read back through the layouts read_state
uses; layout 1's state migrated in place at start; join-once deciding each left record once."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

import samzapy
from samzapy.config.properties import Config
from samzapy.kafka.partitioner import partition_for_key
from samzapy.operators.bucketed_join import JoinLayoutError
from samzapy.operators.event_time import end_of_stream_record
from samzapy.operators.registry import IDS_TAG
from samzapy.operators.stream_join_layout import LAYOUT_KEY
from samzapy.pipeline.compiler import TASKS_KEY
from samzapy.pipeline.plan_check import differences
from samzapy.pipeline.stream_join_stage import LAYOUT_CONFIG_KEY, REGISTRY_NAMESPACE, StreamJoinStage
from samzapy.pipeline.task import PipelineTask
from samzapy.pipeline.testing import PipelineHarness
from samzapy.testing import TaskHarness, distinct_by_id

BEFORE, AFTER, GRACE = 6_000, 3_000, 2_000
STORES = ["j-left", "j-right", "j-expiry", "j-time"]


def join_app(kind: str, *, once: bool, ids: bool) -> samzapy.App:
    """Left records joined to right ones of the same key, ``BEFORE``/``AFTER`` ms apart."""
    app = samzapy.App("sj")
    left = app.stream("left-in", timestamp="ts")
    right = app.stream("right-in", timestamp="ts")
    left.join(
        right,
        lambda lv, rv: {"l": lv and lv["id"], "r": rv and rv["id"], "at": [lv and lv["ts"], rv and rv["ts"]]},
        within=(BEFORE, AFTER),
        grace=GRACE,
        kind=kind,
        ids=(lambda v: v["id"], lambda v: v["id"]) if ids else None,
        once=once,
        name="j",
    ).to("out")
    return app


def join_events(n: int, seed: int) -> list[tuple[str, str, dict[str, Any]]]:
    """Left and right records on 8 keys (so that a left record may match several right ones, and
    some none), in time order with disorder within the grace and some beyond it (late records);
    exact copies of left records (same key, time and id) arriving soon or after their window
    closed."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        t = i * 1_000
        key = f"k{rng.randrange(8)}"
        if rng.random() < 0.7:
            ts = t + rng.randrange(-1_500, 1_500)
            events.append((ts, "right-in", key, {"id": f"r{i}", "ts": ts}))
        if rng.random() < 0.6:
            ts = t + rng.randrange(-1_500, 1_500)
            record = {"id": f"l{i}", "ts": ts}
            events.append((ts, "left-in", key, record))
            if rng.random() < 0.15:
                events.append((ts + rng.choice([500, 60_000]), "left-in", key, record))
    events.sort(key=lambda e: e[0])
    out = [(topic, key, value) for _, topic, key, value in events]
    for k in range(0, len(out) - 9, 23):  # disorder beyond the grace: late records
        out[k], out[k + 9] = out[k + 9], out[k]
    return out


def run(app: samzapy.App, events: list, layout: int, crashes: int) -> tuple[list, list, dict]:
    """Every task over ``events`` (``window()`` every 40 records); ``crashes`` times: commit,
    more input, kill -9 of every task, restart from the changelogs and checkpoint. (outputs as
    sent, re-sent copies included; logical stores before the end of input; metrics)"""
    with PipelineHarness(app, partitions=2, config={LAYOUT_CONFIG_KEY: str(layout)}) as h:
        step = len(events) // (crashes + 1)
        for i, (topic, key, value) in enumerate(events):
            h.send(topic, key, value)
            if i % 40 == 39:
                h.window()
            if crashes and i // step < crashes and i % step == step // 2:
                h.commit()
            elif crashes and i // step < crashes and i % step == step - 1:
                h.crash()
                h.restart()
        stores = logical_stores(h)
        h.end_of_stream()
        h.window()
        sent = [(r.partition, r.id, r.key, r.value) for r in h.records("out")]
        metrics = {
            name: sum(t.metrics.counter(name).value for t in h.tasks)
            for name in ("duplicates-dropped", "late-join-records")
        }
    return sent, stores, metrics


def stage_of(task: PipelineTask) -> StreamJoinStage:
    return next(s for s in task._stages.values() if isinstance(s, StreamJoinStage))


def logical_stores(h: PipelineHarness) -> list[dict[str, Any]]:
    """What each task's join stores say, whatever their layout, decoded by the layouts read_state
    uses (``PipelineTask.state_layouts``): the open buffered records of each side (with their
    matched flag where the side is sent unmatched), the left records decided (layout 1's
    registry, layout 2's decided flags) and the watermark."""
    found = []
    for t in h.tasks:
        task = t.task
        layouts = type(task).state_layouts(h.config)
        stage = stage_of(task)
        kind = stage.node.args["kind"]
        wm = stage.time.watermark.current
        state: dict[str, Any] = {"watermark": wm, "decided": set()}
        for store, reach, emits in (("j-left", AFTER, kind != "inner"), ("j-right", BEFORE, kind == "outer")):
            rows = []
            for key, value in raw_entries(t, store):
                row = layouts[store].decode(key, value)
                body = orjson.loads(row["value_json"])
                if body.get("decided"):
                    state["decided"].add(body["record_id"])
                if body["event_time"] + reach >= wm:  # open
                    flag = body["matched"] if emits else None
                    rows.append((row["key_json"], body["event_time"], body["record_id"], flag, body["value"]))
            state[store] = sorted(rows, key=repr)  # layout 2 orders by bucket first
        if stage.layout == 1 and stage.registry is not None:
            ids = REGISTRY_NAMESPACE + IDS_TAG
            state["decided"] |= {
                k[len(ids) :].decode() for k, _ in raw_entries(t, "j-time") if k.startswith(ids)
            }
        found.append(state)
    return found


def raw_entries(t: TaskHarness, store: str) -> list[tuple[bytes, bytes]]:
    t.stores[store].flush()  # the cache's dirty entries into the bytes underneath
    with t.stores[store].raw.all() as entries:
        return [(e.key, e.value) for e in entries]


@pytest.mark.parametrize(
    ("kind", "once", "ids", "crashes"),
    [
        ("inner", False, True, 0),
        ("left", False, True, 2),
        ("outer", False, True, 0),
        ("outer", False, False, 2),
        ("inner", True, True, 2),
        ("left", True, True, 0),
        ("left", True, True, 3),
        ("outer", True, True, 2),
    ],
)
def test_layout_2_gives_layout_1s_outputs_and_logical_stores(
    kind: str, once: bool, ids: bool, crashes: int
) -> None:
    app = join_app(kind, once=once, ids=ids)
    events = join_events(300, seed=5 + crashes)
    old_sent, old_stores, old_metrics = run(app, events, 1, crashes)
    new_sent, new_stores, new_metrics = run(app, events, 2, crashes)
    assert new_sent == old_sent  # ids, keys, value bytes, partitions, order (re-sent copies too)
    assert new_stores == old_stores
    assert new_metrics["late-join-records"] == old_metrics["late-join-records"]
    # not duplicates-dropped: a late copy of a left record closed but not expired yet decides it
    # in both layouts; layout 1 then refuses the original at its expiry (one more count), layout
    # 2 finds it decided and skips it. When expiry runs differs after a restart (the backlog is
    # processed without window() calls), so the counts can differ, the outputs not.
    outputs = [orjson.loads(v) for _, _, _, v in old_sent]
    assert sum(1 for o in outputs if o["l"] and o["r"]) > 40  # joined pairs
    if kind != "inner":
        assert sum(1 for o in outputs if o["r"] is None) > 20  # left records sent unmatched
    assert old_metrics["late-join-records"] > 0
    assert any(s["j-left"] and s["j-right"] for s in old_stores)  # records still open
    if once:
        assert old_metrics["duplicates-dropped"] > 0 and new_metrics["duplicates-dropped"] > 0
        assert all(s["decided"] for s in old_stores)


def test_once_decides_each_left_record_once_also_when_it_matches_two_right_records() -> None:
    """Without ``ids``, layout 1 registered the result's (pair's) id: a left record matching
    two right records was joined twice. Layout 2 decides the left record itself."""
    app = join_app("inner", once=True, ids=False)
    outputs = {}
    for layout in (1, 2):
        with PipelineHarness(app, config={LAYOUT_CONFIG_KEY: str(layout)}) as h:
            h.send("right-in", "k", {"id": "r1", "ts": 10_000})
            h.send("right-in", "k", {"id": "r2", "ts": 11_000})
            h.send("left-in", "k", {"id": "l1", "ts": 10_500})
            h.end_of_stream()
            outputs[layout] = [v for _, v in h.outputs("out")]
            dropped = h.tasks[0].metrics.counter("duplicates-dropped").value
        assert dropped == (0 if layout == 1 else 1)
    assert [o["r"] for o in outputs[1]] == ["r1", "r2"]
    assert outputs[2] == outputs[1][:1]


# ------------------------------------------------------------------- migration at start


def task_harness(app: samzapy.App, layout: int, base: Path) -> TaskHarness:
    """The app's one task over RocksDB stores in ``base`` (a fresh harness sees them as they are)."""
    plan = app.plan()
    config = Config(plan.properties("<test>", "<harness>")).with_overrides(
        {TASKS_KEY: 1, LAYOUT_CONFIG_KEY: str(layout)}
    )
    task_class = type("SjTask", (PipelineTask,), {"plan": plan})
    return TaskHarness(task_class, config, base_dir=base, loopback=True)


def feed(h: TaskHarness, events: list) -> None:
    for i, (topic, key, value) in enumerate(events):
        h.send(f"kafka.{topic}", key, value)
        if i % 40 == 39:
            h.window()


def end(h: TaskHarness) -> None:
    headers, _ = end_of_stream_record()
    for topic in ("kafka.left-in", "kafka.right-in"):
        h.send(topic, None, {"control": "end-of-stream"}, headers=headers)
    h.window()


def outputs_of(h: TaskHarness) -> dict[str, tuple[bytes, bytes]]:
    return {i: (r.key, r.value) for i, r in distinct_by_id(h.records("out")).items()}


@pytest.mark.parametrize(("kind", "once"), [("left", True), ("outer", False), ("inner", True)])
def test_layout_1_state_is_migrated_at_start_and_the_outputs_are_layout_1s(
    tmp_path: Path, kind: str, once: bool
) -> None:
    """Half the input under layout 1, then the job started with layout 2 over the same RocksDB
    stores: they are rewritten at start (pending entries for the sides sent unmatched, decided
    flags from layout 1's registry, which is still consulted for left records decided before the
    switch whose buffered record had expired), and the outputs of both halves are those of
    layout 1 over the whole input."""
    app = join_app(kind, once=once, ids=True)
    events = join_events(300, seed=21)
    whole = task_harness(app, 1, tmp_path / "all-v1")
    feed(whole, events)
    end(whole)
    want = outputs_of(whole)
    whole.close()

    half = len(events) // 2
    first = task_harness(app, 1, tmp_path / "switch")
    feed(first, events[:half])
    first.commit()
    got = outputs_of(first)
    for store in first.stores.values():
        store.close()
    second = task_harness(app, 2, tmp_path / "switch")
    stage = stage_of(second.task)
    assert second.stores["j-expiry"].get(LAYOUT_KEY) is not None
    assert stage.legacy is once
    feed(second, events[half:])
    end(second)
    got |= outputs_of(second)
    assert got == want
    if once:
        assert second.metrics.counter("duplicates-dropped").value > 0
    second.close()


def test_layout_1_refuses_layout_2_state_naming_the_store(tmp_path: Path) -> None:
    app = join_app("left", once=True, ids=True)
    h = task_harness(app, 2, tmp_path / "v2")
    feed(h, join_events(20, seed=1))
    h.commit()
    for store in h.stores.values():
        store.close()
    with pytest.raises(JoinLayoutError, match="store 'j-expiry' holds the join's state in layout 2"):
        task_harness(app, 1, tmp_path / "v2")


def test_a_bad_layout_value_is_refused_naming_the_key() -> None:
    app = join_app("left", once=False, ids=True)
    with pytest.raises(ValueError, match="pipeline.join.state.layout must be 1 or 2"):
        PipelineHarness(app, config={LAYOUT_CONFIG_KEY: "3"})


# ------------------------------------------------------------------- read back, plan check


def test_the_join_stores_read_back_through_the_layout_2_layouts_and_reshard_by_join_key() -> None:
    """Every entry of the four stores decodes (buffered records, pending entries and the layout's
    meta entries, the event time); a reshard can place each (a join key in the task's partition,
    or a merge rule for the task's own entries)."""
    app = join_app("outer", once=True, ids=True)
    with PipelineHarness(app, partitions=2) as h:
        for topic, key, value in join_events(120, seed=3):
            h.send(topic, key, value)
        kinds: dict[str, set[str]] = {store: set() for store in STORES}
        for partition, t in enumerate(h.tasks):
            layouts = type(t.task).state_layouts(h.config)
            for store in STORES:
                for key, value in raw_entries(t, store):
                    row = layouts[store].decode(key, value)
                    kinds[store].add(row["kind"])
                    placed_by = layouts[store].partition_key(key, value)
                    if placed_by is None:
                        assert layouts[store].merge_rule(key, value) is not None, (store, key)
                    else:
                        assert partition_for_key(placed_by, 2) == partition
                    if store == "j-left" and row["kind"] == "buffered":
                        body = orjson.loads(row["value_json"])
                        assert set(body) == {"event_time", "record_id", "matched", "decided", "value"}
        meta = orjson.loads(
            next(
                layouts["j-expiry"].decode(k, v)
                for k, v in raw_entries(h.tasks[0], "j-expiry")
                if k == LAYOUT_KEY
            )["value_json"]
        )
    assert kinds == {
        "j-left": {"buffered"},
        "j-right": {"buffered"},
        "j-expiry": {"pending", "internal"},
        "j-time": {"internal"},
    }
    assert meta == {"version": 2, "bucket_ms": 4 * (BEFORE + AFTER)}


def test_a_recorded_plan_of_the_layout_1_join_accepts_layout_2() -> None:
    """The plan a deployed pipeline recorded with the layout-1 join (same store names and serdes)."""
    recorded = {
        "job": "sj",
        "steps": [
            {
                "kind": "stream_stream_join",
                "name": "j",
                "at": "app.py:5",
                "stores": STORES,
                "key": "string",
                "value": "json",
            }
        ],
    }
    assert differences(recorded, join_app("left", once=True, ids=True).plan().signature()) == []


# ------------------------------------------------------------- the ad-click join's task version


def ad_events(n: int, seed: int) -> list[tuple[str, str, dict[str, Any]]]:
    """Impressions and clicks in time order with disorder, orphan clicks, exact copies of clicks
    (the same click, as :func:`samzapy.generate.ads` sends them) arriving soon or much later."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        t, imp = i * 1_000, f"imp{i}"
        if rng.random() < 0.8:
            ts = t + rng.randrange(-3_000, 3_000)
            events.append((ts, "impressions", imp, {"impression_id": imp, "ad": f"ad{i % 7}", "ts": ts}))
        if rng.random() < 0.6:
            ts = t + rng.choice([2_000, 30_000, 200_000])
            click = {"click_id": f"c{i}", "impression_id": imp, "ts": ts}
            events.append((ts, "clicks", imp, click))
            if rng.random() < 0.15:
                events.append((ts + rng.choice([1_000, 150_000]), "clicks", imp, click))
    events.sort(key=lambda e: e[0])
    return [(topic, key, value) for _, topic, key, value in events]


def test_the_ad_click_join_pipeline_gives_the_task_versions_outputs_and_stores_in_layout_2() -> None:
    """jobs/ad_click_join_pipeline.py and AdClickJoinTask, both in their default layout (2), on
    one input: the same outputs (ids, bytes) and byte-identical join stores; the pipeline with
    kill -9 rounds."""
    from samzapy.config import load_config
    from samzapy.jobs.ad_click_join import AdClickJoinTask
    from samzapy.jobs.ad_click_join_pipeline import app
    from samzapy.operators.event_time import CONTROL_HEADER, END_OF_STREAM
    from samzapy.testing import MemoryBroker

    events = ad_events(300, seed=4)
    broker = MemoryBroker(default_partitions=2)
    config = load_config(Path(__file__).parents[2] / "config" / "ad-click-join.properties")
    tasks = [
        TaskHarness(AdClickJoinTask, config, partition=p, broker=broker, loopback=True) for p in range(2)
    ]

    def settle() -> None:
        while sum(t.process_available() for t in tasks):
            pass

    for topic, key, value in events:
        broker.append(topic, partition_for_key(key.encode(), 2), key.encode(), orjson.dumps(value))
        settle()
    for topic in ("impressions", "clicks"):
        for p in range(2):
            headers = [(CONTROL_HEADER, END_OF_STREAM)]
            broker.append(topic, p, None, b'{"control":"end-of-stream"}', headers=headers)
    settle()
    for t in tasks:
        t.window()
    topics = ("ad-clicks-joined", "unjoined-clicks")
    want = {i: (r.key, r.value) for topic in topics for i, r in distinct_by_id(broker.records(topic)).items()}
    names = ["click-buffer", "impression-buffer", "join-expiry", "join-state"]
    task_stores = [[dict(raw_entries(t, n)) for n in names] for t in tasks]
    for t in tasks:
        t.close()
    with PipelineHarness(app, partitions=2) as h:
        step = len(events) // 3
        for i, (topic, key, value) in enumerate(events):
            h.send(topic, key, value)
            if i // step < 2 and i % step == step // 2:
                h.commit()
            elif i // step < 2 and i % step == step - 1:
                h.crash()
                h.restart()
        h.end_of_stream()
        h.window()
        got = {i: (r.key, r.value) for topic in topics for i, r in distinct_by_id(h.records(topic)).items()}
        parts = ["left", "right", "expiry", "time"]
        pipe_stores = [[dict(raw_entries(t, f"ad-click-join-{p}")) for p in parts] for t in h.tasks]
    assert got == want
    assert pipe_stores == task_stores
    assert len(want) > 150 and any(s[0] and s[2] for s in task_stores)  # decided clicks and meta kept

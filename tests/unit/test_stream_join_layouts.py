"""The click join's store layout 2 against layout 1: same outputs (ids, bytes), same logical
stores (read back through the layouts read_state decodes with), also across kill -9 rounds;
the refusal of the other layout's state; the changelog records each writes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from samzapy.config import load_config
from samzapy.jobs.ad_click_join import STORES, AdClickJoinTask
from samzapy.operators.bucketed_join import BucketedStreamJoin, JoinLayoutError
from samzapy.operators.event_time import end_of_stream_record
from samzapy.operators.watermark import Watermark
from samzapy.stores.memory import InMemoryStore
from samzapy.testing import TaskHarness, distinct_by_id

CONFIG = Path(__file__).parents[2] / "config" / "ad-click-join.properties"
EOS = end_of_stream_record()


def ad_events(n: int, seed: int) -> list[tuple[str, str, dict[str, Any]]]:
    """Impressions and clicks in time order with disorder (within the 10 s lateness, and some
    beyond it: late records); clicks before their impression, orphans, copies of clicks (the
    same click, as :func:`samzapy.generate.ads` sends them) arriving soon or much later."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        t = i * 1_000
        imp = f"imp{i}"
        if rng.random() < 0.8:
            ts = t + rng.randrange(-3_000, 3_000)
            events.append((ts, "impressions", imp, {"impression_id": imp, "ts": ts}))
        if rng.random() < 0.6:
            ts = t + rng.choice([-2_000, 2_000, 30_000, 200_000])
            click = {"click_id": f"c{i}", "impression_id": imp, "ts": ts}
            events.append((ts, "clicks", imp, click))
            if rng.random() < 0.15:  # a copy arriving soon, or after its window closed
                events.append((ts + rng.choice([500, 150_000]), "clicks", imp, click))
    events.sort(key=lambda e: e[0])
    out = [(topic, key, value) for _, topic, key, value in events]
    for k in range(0, len(out) - 5, 37):  # some disorder beyond the lateness: late records
        out[k], out[k + 5] = out[k + 5], out[k]
    return out


def run(layout: int, events: list, tmp: Path, crashes: int) -> tuple[dict, dict, dict, dict, int]:
    """One task over ``events``: ``crashes`` times, commit, more input, kill -9, restart.
    (outputs by id, logical stores before the end, logical stores after it, metrics,
    changelog records)."""
    h = TaskHarness(AdClickJoinTask, load_config(CONFIG, [f"join.state.layout={layout}"]), base_dir=tmp)
    step = len(events) // (crashes + 1)
    for i, (topic, key, value) in enumerate(events):
        h.send(f"kafka.{topic}", key, value)
        if i % 200 == 199:
            h.window()
        if crashes and i % step == step // 2 and i // step < crashes:
            h.commit()
        elif crashes and i % step == step - 1 and i // step < crashes:
            h.crash()
            h.restart()
    before_end = logical_stores(h)
    for stream in ("kafka.impressions", "kafka.clicks"):
        h.send(stream, None, {"control": "end-of-stream"}, headers=EOS[0])
    h.window()
    h.commit()
    after_end = logical_stores(h)
    outputs = {}
    for stream in ("ad-clicks-joined", "unjoined-clicks"):
        outputs |= {i: (stream, r.key, r.value) for i, r in distinct_by_id(h.records(stream)).items()}
    changelog = sum(len(h.broker.records(t)) for t in h.broker.topics() if t.endswith("changelog"))
    metrics = {name: h.metrics.counter(name).value for name in ("joined-clicks", "unjoined-clicks")}
    h.close()
    return outputs, before_end, after_end, metrics, changelog


def logical_stores(h: TaskHarness) -> dict[str, Any]:
    """What the stores say, whatever their layout: the open buffered records of each side (a
    closed record is gone in layout 1, waiting for its bucket in layout 2), the clicks decided
    within the retention (layout 1's registry, layout 2's decided flags) and the watermark;
    decoded by the layouts :func:`read_state` and the reshard use."""
    config = h.config
    layouts = AdClickJoinTask.state_layouts(config)
    task = h.task
    wm = task.time.watermark.current
    reach = {"click-buffer": config.get_int("join.window.after.ms"), "impression-buffer": 120_000}
    found: dict[str, Any] = {"watermark": wm, "decided": {}}
    for store in STORES[:2]:
        rows = []
        for entry in h.stores[store].all():
            row = layouts[store].decode(entry.key, entry.value)
            body = orjson.loads(row["value_json"])
            if body.get("decided"):
                found["decided"][body["record_id"]] = body["event_time"]
            if body["event_time"] + reach[store] >= wm:  # open (grace 0)
                rows.append(
                    (row["key_json"], body["event_time"], body["record_id"], body["matched"], body["value"])
                )
        found[store] = sorted(rows, key=repr)  # layout 2 orders by bucket first
    registry = task.registry
    if registry is not None:
        for entry in h.stores["join-state"].all():
            if entry.key.startswith(b"reg\x00ri"):
                found["decided"][entry.key[6:].decode()] = int.from_bytes(entry.value[:8], "big") - (1 << 63)
    return found


@pytest.mark.parametrize("crashes", [0, 3])
def test_layout_2_gives_layout_1s_outputs_and_logical_stores(tmp_path: Path, crashes: int) -> None:
    events = ad_events(400, seed=11 + crashes)
    old = run(1, events, tmp_path / "v1", crashes)
    new = run(2, events, tmp_path / "v2", crashes)
    assert new[0] == old[0]  # outputs: ids, streams, key and value bytes
    assert new[1] == old[1]  # logical stores with records still open
    assert new[2] == old[2]  # and after the end of both streams
    assert new[3] == old[3]
    joined = [v for v in old[0].values() if v[0] == "ad-clicks-joined"]
    assert len(joined) > 100 and len(old[0]) - len(joined) > 30 and old[1]["click-buffer"]
    assert new[4] < old[4] * 0.7, (new[4], old[4])


def outputs_of(h: TaskHarness) -> dict[str, tuple[str, Any, Any]]:
    found = {}
    for stream in ("ad-clicks-joined", "unjoined-clicks"):
        found |= {i: (stream, r.key, r.value) for i, r in distinct_by_id(h.records(stream)).items()}
    return found


def test_layout_1_state_is_migrated_at_start_and_the_outputs_are_layout_1s(tmp_path: Path) -> None:
    """Half the input under layout 1, then the job restarted with layout 2 over the same
    stores: they are rewritten at start, the layout-1 registry is still consulted (copies of
    clicks decided before the switch, whose buffered record had expired, are refused), and
    the outputs of both halves are those of layout 1 over the whole input."""
    events = ad_events(400, seed=12)
    want = run(1, events, tmp_path / "all-v1", 0)[0]
    base = tmp_path / "switch"
    half = len(events) // 2
    first = TaskHarness(AdClickJoinTask, load_config(CONFIG, ["join.state.layout=1"]), base_dir=base)
    for i, (topic, key, value) in enumerate(events[:half]):
        first.send(f"kafka.{topic}", key, value)
        if i % 200 == 199:
            first.window()
    first.commit()
    got = outputs_of(first)
    assert first.task.registry is not None and any(
        e.key.startswith(b"reg\x00ri") for e in first.stores["join-state"].all()
    )
    for store in first.stores.values():
        store.close()
    second = TaskHarness(AdClickJoinTask, load_config(CONFIG, ["join.state.layout=2"]), base_dir=base)
    assert second.task.legacy_registry is not None
    assert second.stores["join-expiry"].get(b"\xff" * 8 + b"layout") is not None
    for i, (topic, key, value) in enumerate(events[half:]):
        second.send(f"kafka.{topic}", key, value)
        if i % 200 == 199:
            second.window()
    for stream in ("kafka.impressions", "kafka.clicks"):
        second.send(stream, None, {"control": "end-of-stream"}, headers=EOS[0])
    second.window()
    got |= outputs_of(second)
    assert got == want
    assert second.metrics.counter("duplicate-clicks").value > 0
    second.close()


def test_layout_1_refuses_layout_2_state_naming_the_store(tmp_path: Path) -> None:
    base = tmp_path / "v2"
    h = TaskHarness(AdClickJoinTask, load_config(CONFIG, ["join.state.layout=2"]), base_dir=base)
    for topic, key, value in ad_events(20, seed=1):
        h.send(f"kafka.{topic}", key, value)
    h.commit()
    for store in h.stores.values():
        store.close()
    with pytest.raises(JoinLayoutError, match="store 'join-expiry' holds the click join's state in layout 2"):
        TaskHarness(AdClickJoinTask, load_config(CONFIG, ["join.state.layout=1"]), base_dir=base)


def test_layout_2_refuses_stores_with_entries_but_no_marker() -> None:
    left, right, index = InMemoryStore(), InMemoryStore(), InMemoryStore()
    right.put(b"some-layout-1-key", b"\x00{}")
    with pytest.raises(JoinLayoutError, match="store 'impression-buffer' holds stream-join state without"):
        BucketedStreamJoin(
            left,
            right,
            index,
            Watermark(InMemoryStore(), 0),
            lambda a, b: (a, b),
            window_before_ms=10,
            window_after_ms=10,
            store_names=STORES,
        )


def test_layout_2_entries_decode_with_their_join_key_and_the_meta_entries_merge_by_max() -> None:
    from samzapy.operators.state_layout import MAX
    from samzapy.operators.stream_join_layout import JoinBucketLayout, JoinPendingLayout

    left, right, index = InMemoryStore(), InMemoryStore(), InMemoryStore()
    wm = Watermark(InMemoryStore(), 0)
    join = BucketedStreamJoin(
        left,
        right,
        index,
        wm,
        lambda a, b: [a, b],
        window_before_ms=10,
        window_after_ms=5,
        kind="left",
        once_retention_ms=1000,
    )
    wm.observe(100)
    assert join.add_left(b"k\x00", 100, {"c": 1}, "c1") == []  # waits unmatched: a pending entry
    assert join.add_left(b"j", 101, {"c": 2}, "c2") == []
    [joined] = join.add_right(b"j", 98, {"i": 1}, "i1")  # decides c2
    assert joined.value == [{"c": 2}, {"i": 1}]
    rows: dict[str, list] = {"left": [], "right": [], "index": []}
    for name, layout, store in (
        ("left", JoinBucketLayout(), left),
        ("right", JoinBucketLayout(), right),
        ("index", JoinPendingLayout(), index),
    ):
        for e in store.all():
            row = layout.decode(e.key, e.value)
            rows[name].append((row["kind"], orjson.loads(row["key_json"]), orjson.loads(row["value_json"])))
            part, rule = layout.partition_key(e.key, e.value), layout.merge_rule(e.key, e.value)
            assert (part is None) == (rule == MAX) == (row["kind"] == "internal")
            assert part is None or part == orjson.loads(row["key_json"]).encode()
    click = {"event_time": 101, "record_id": "c2", "matched": True, "decided": True, "value": {"c": 2}}
    waiting = {"event_time": 100, "record_id": "c1", "matched": False, "decided": False, "value": {"c": 1}}
    assert sorted(rows["left"], key=repr) == sorted(
        [("buffered", "j", click), ("buffered", "k\x00", waiting)], key=repr
    )
    imp = {"event_time": 98, "record_id": "i1", "matched": True, "decided": False, "value": {"i": 1}}
    assert rows["right"] == [("buffered", "j", imp)]
    assert rows["index"] == [
        ("pending", "k\x00", {"close_at": 105, "side": "l", "event_time": 100, "record_id": "c1"}),
        # c2 waited unmatched before i1 came: its entry stays until it closes (skipped: decided)
        ("pending", "j", {"close_at": 106, "side": "l", "event_time": 101, "record_id": "c2"}),
        ("internal", "layout", {"version": 2, "bucket_ms": 60}),  # 4 x (10 + 5)
        ("internal", "max-decided", {"max_decided": 101}),
    ]


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("once", [None, 300])
def test_bucketed_join_gives_stream_join_and_registry_results_call_by_call(
    kind: str, once: int | None
) -> None:
    """Random records (disorder, late ones, copies) through both operators, expiry after every
    call in one run and rarely in the other; narrow buckets and GC batches of 3 put many
    records on bucket edges and leave closed ones waiting. Each call returns the same results
    in the same order; with join-once, layout 1's are filtered by a JoinRegistry keyed by
    (key, time, record id) of the left record."""
    from samzapy.operators.registry import JoinRegistry
    from samzapy.operators.stream_join import StreamStreamJoin

    rng = random.Random(f"{kind}-{once}")
    events = []
    for i in range(700):
        side, key, t = rng.choice("lr"), bytes([97 + rng.randrange(3)]), 3 * i + rng.randrange(-60, 60)
        events.append((side, key, t, f"{side}{i}"))
        if rng.random() < 0.1:  # a copy, later
            events.insert(len(events) + rng.randrange(-5, 1) if len(events) > 6 else len(events), events[-1])
    for eager in (False, True):
        wm1, wm2 = Watermark(InMemoryStore(), 40), Watermark(InMemoryStore(), 40)
        common: dict[str, Any] = {"window_before_ms": 10, "window_after_ms": 25, "grace_ms": 3, "kind": kind}
        old = StreamStreamJoin(
            InMemoryStore(), InMemoryStore(), InMemoryStore(), wm1, lambda a, b: (a, b), **common
        )
        new = BucketedStreamJoin(
            InMemoryStore(),
            InMemoryStore(),
            InMemoryStore(),
            wm2,
            lambda a, b: (a, b),
            once_retention_ms=once,
            bucket_ms=16,
            gc_batch=3,
            **common,
        )
        registry = JoinRegistry(InMemoryStore(), once) if once else None

        def decided(results: list, registry: JoinRegistry | None = registry) -> list:
            if registry is None:
                return results
            return [
                r
                for r in results
                if r.left is None or registry.try_register(f"{r.key!r}|{r.left_time}|{r.left}", r.left_time)
            ]

        for n, (side, key, t, rid) in enumerate(events):
            for wm in (wm1, wm2):
                wm.observe(t)
            got_old = decided((old.add_left if side == "l" else old.add_right)(key, t, rid, rid))
            got_new = (new.add_left if side == "l" else new.add_right)(key, t, rid, rid)
            assert got_new == got_old, (n, side, key, t, rid)
            if eager or n % 97 == 0:
                assert new.expire() == decided(old.expire()), n
        for wm in (wm1, wm2):
            wm.advance_to(100_000)
        assert new.expire() == decided(old.expire())

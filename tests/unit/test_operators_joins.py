"""Table-table, stream-table and stream-stream joins and the join registry, over a real
sorted in-memory store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.metrics import MetricsGroup  # noqa: E402
from samzapy.operators.joins import StreamTableJoin, TableChange, TableTableJoin  # noqa: E402
from samzapy.operators.registry import JoinRegistry  # noqa: E402
from samzapy.operators.stream_join import StreamStreamJoin  # noqa: E402
from samzapy.operators.watermark import Watermark  # noqa: E402


def pair(left: Any, right: Any) -> tuple[Any, Any]:
    return (left, right)


def table_join(kind: str) -> TableTableJoin:
    return TableTableJoin(SortedDictStore(), SortedDictStore(), pair, kind)  # type: ignore[arg-type]


def test_inner_table_join_emits_when_both_sides_exist_and_retracts_on_delete() -> None:
    join = table_join("inner")
    assert join.update_left(b"u", b"profile") is None
    assert join.update_right(b"u", b"settings") == TableChange(b"u", (b"profile", b"settings"))
    assert join.update_left(b"u", b"profile2") == TableChange(b"u", (b"profile2", b"settings"))
    assert join.update_right(b"u", None) == TableChange(b"u", None)
    assert join.update_left(b"u", None) is None
    assert join.update_left(b"x", None) is None


def test_left_table_join_emits_for_every_left_value() -> None:
    join = table_join("left")
    assert join.update_right(b"u", b"s") is None
    assert join.update_right(b"v", b"s") is None
    assert join.update_left(b"v", b"p") == TableChange(b"v", (b"p", b"s"))
    assert join.update_left(b"w", b"p") == TableChange(b"w", (b"p", None))
    assert join.update_right(b"w", b"s") == TableChange(b"w", (b"p", b"s"))
    assert join.update_right(b"w", None) == TableChange(b"w", (b"p", None))
    assert join.update_left(b"w", None) == TableChange(b"w", None)


def test_outer_table_join_emits_while_either_side_exists() -> None:
    join = table_join("outer")
    assert join.update_right(b"u", b"s") == TableChange(b"u", (None, b"s"))
    assert join.update_left(b"u", b"p") == TableChange(b"u", (b"p", b"s"))
    assert join.update_right(b"u", None) == TableChange(b"u", (b"p", None))
    assert join.update_left(b"u", None) == TableChange(b"u", None)
    assert join.update_left(b"u", None) is None


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("right_at", [0, 1, 2])
def test_table_join_last_emission_does_not_depend_on_when_the_other_side_arrives(
    kind: str, right_at: int
) -> None:
    updates: list[tuple[str, bytes]] = [("l", b"p1"), ("l", b"p2")]
    updates.insert(right_at, ("r", b"s1"))
    join = table_join(kind)
    changes = [
        join.update_left(b"u", v) if side == "l" else join.update_right(b"u", v) for side, v in updates
    ]
    assert [c for c in changes if c is not None][-1] == TableChange(b"u", (b"p2", b"s1"))


def test_unknown_join_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="join kind"):
        TableTableJoin(SortedDictStore(), SortedDictStore(), pair, "full")  # type: ignore[arg-type]


def test_stream_table_inner_and_left() -> None:
    inner = StreamTableJoin(SortedDictStore(), pair)
    left = StreamTableJoin(SortedDictStore(), pair, "left")
    for join in (inner, left):
        join.update_table(b"u", b"94103")
    assert inner.join(b"u", b"view") == (b"view", b"94103")
    assert inner.join(b"x", b"view") is None
    assert left.join(b"x", b"view") == (b"view", None)
    inner.update_table(b"u", None)
    assert inner.join(b"u", b"view") is None


def ss_join(kind: str = "inner", before: int = 10, after: int = 20, grace: int = 0, lateness: int = 0):  # type: ignore[no-untyped-def]
    store = SortedDictStore()
    wm = Watermark(store, lateness)
    metrics = MetricsGroup("t")
    join = StreamStreamJoin(
        SortedDictStore(),
        SortedDictStore(),
        SortedDictStore(),
        wm,
        lambda left, right: {"l": left, "r": right},
        window_before_ms=before,
        window_after_ms=after,
        grace_ms=grace,
        kind=kind,  # type: ignore[arg-type]
        metrics=metrics,
    )
    return wm, join, metrics


def test_stream_join_matches_within_the_window_whichever_side_comes_first() -> None:
    wm, join, _ = ss_join(lateness=1000)
    assert join.add_left(b"q", 100, "imp", "i1") == []
    got = [r.value for r in join.add_right(b"q", 90, "c-early", "c1")]
    got += [r.value for r in join.add_right(b"q", 120, "c-late", "c2")]
    got += [r.value for r in join.add_right(b"q", 89, "c-too-early", "c3")]
    got += [r.value for r in join.add_right(b"q", 121, "c-too-late", "c4")]
    assert got == [{"l": "imp", "r": "c-early"}, {"l": "imp", "r": "c-late"}]
    # a click before its impression (delayed primary)
    assert join.add_right(b"z", 500, "click", "c5") == []
    [result] = join.add_left(b"z", 495, "imp", "i2")
    assert (result.value, result.id, result.left_time, result.right_time) == (
        {"l": "imp", "r": "click"},
        "j:7a:i2:c5",
        495,
        500,
    )


def test_left_join_unmatched_is_emitted_only_after_the_window_closes() -> None:
    wm, join, _ = ss_join("left", before=10, after=20)
    wm.observe(100)
    join.add_left(b"q", 100, "imp", "i1")
    for t in (110, 120):
        wm.observe(t)
        assert join.expire() == []
    wm.observe(121)
    [result] = join.expire()
    assert (result.left, result.right, result.id) == ("imp", None, "j:71:i1:")
    assert join.expire() == []


def test_left_join_matched_record_is_not_emitted_as_unmatched() -> None:
    wm, join, _ = ss_join("left", lateness=100)
    join.add_left(b"q", 100, "imp", "i1")
    assert len(join.add_right(b"q", 105, "click", "c1")) == 1
    wm.advance_to(1000)
    assert join.expire() == []


def test_outer_join_emits_unmatched_of_both_sides_once_closed() -> None:
    wm, join, _ = ss_join("outer", before=10, after=20, grace=5)
    wm.observe(100)
    join.add_left(b"a", 100, "L", "l1")
    join.add_right(b"b", 100, "R", "r1")
    wm.advance_to(115)
    assert join.expire() == []
    wm.advance_to(116)  # the right record's window is closed: 100 + 10 + 5 < 116
    assert [(r.left, r.right) for r in join.expire()] == [(None, "R")]
    wm.advance_to(125)
    assert join.expire() == []
    wm.advance_to(126)
    assert [(r.left, r.right) for r in join.expire()] == [("L", None)]


def test_inner_join_expires_records_silently_and_purges_stores() -> None:
    wm, join, _ = ss_join()
    join.add_left(b"q", 0, "imp", "i1")
    wm.advance_to(1000)
    assert join.expire() == []
    assert join.add_right(b"q", 5, "click", "c1") == []


def test_closed_records_are_ignored_even_before_expire_runs() -> None:
    wm, join, metrics = ss_join("left", before=10, after=20)
    join.add_left(b"q", 100, "imp", "i1")
    wm.advance_to(200)
    # the click fits the impression's window but both windows are closed: no match
    [late] = join.add_left(b"q", 105, "imp2", "i2")
    assert (late.left, late.right) == ("imp2", None)
    assert join.add_right(b"q", 101, "click", "c1") == []
    assert metrics.snapshot()["late-join-records"] == 2
    assert [r.left for r in join.expire()] == ["imp"]


def test_late_record_still_matches_open_records_of_the_other_side() -> None:
    wm, join, _ = ss_join("outer", before=10, after=50)
    join.add_left(b"q", 100, "imp", "i1")
    wm.advance_to(112)  # a right record at 95 is closed (95 + 10 < 112); the left at 100 is open
    [match] = join.add_right(b"q", 95, "click", "c1")
    assert (match.left, match.right) == ("imp", "click")
    wm.advance_to(1000)
    assert join.expire() == []


def test_duplicate_record_repeats_its_match_with_the_same_id() -> None:
    _, join, _ = ss_join("left", lateness=100)
    join.add_left(b"q", 100, "imp", "i1")
    first = join.add_right(b"q", 101, "click", "c1")
    assert join.add_right(b"q", 101, "click", "c1") == first


def test_registry_registers_each_id_once() -> None:
    registry = JoinRegistry(SortedDictStore(), retention_ms=1000)
    assert registry.try_register("c1", 10)
    assert not registry.try_register("c1", 10)
    assert not registry.try_register("c1", 500)
    assert registry.try_register("c2", 11)
    assert registry.is_registered("c1") and not registry.is_registered("c3")


def test_registry_token_retry_succeeds_only_with_the_same_token() -> None:
    registry = JoinRegistry(SortedDictStore(), retention_ms=1000)
    assert registry.try_register("c1", 10, token=b"joiner-1")
    assert registry.try_register("c1", 10, token=b"joiner-1")
    assert not registry.try_register("c1", 10, token=b"joiner-2")
    assert not registry.try_register("c1", 10)


def test_registry_gc_drops_old_ids_and_refuses_events_older_than_retention() -> None:
    store = SortedDictStore()
    metrics = MetricsGroup("t")
    registry = JoinRegistry(store, retention_ms=100, metrics=metrics)
    assert registry.try_register("old", 0)
    assert registry.try_register("new", 150)
    assert not registry.try_register("ancient", 49)
    assert metrics.snapshot()["registry-too-old"] == 1
    assert registry.gc() == 1
    assert registry.gc() == 0
    assert not registry.is_registered("old") and registry.is_registered("new")
    assert len(store.data) == 3  # new's id and index entry, and the max time


def test_registry_answers_do_not_depend_on_gc_timing_and_survive_restarts() -> None:
    calls = [("a", 0), ("b", 50), ("a", 120), ("c", 200), ("a", 201), ("b", 60)]
    answers = []
    for gc_every_call in (False, True):
        store = SortedDictStore()
        got = []
        for i, (event_id, t) in enumerate(calls):
            registry = JoinRegistry(store, retention_ms=100)  # a "restart" before every call
            got.append(registry.try_register(event_id, t))
            if gc_every_call or i == len(calls) - 1:
                registry.gc()
        answers.append(got)
    assert answers[0] == answers[1] == [True, True, True, True, False, False]


def test_stream_join_matches_a_brute_force_reference_and_ignores_expiry_timing() -> None:
    import random

    from samzapy.stores.cached import CachedStore

    rng = random.Random(9)
    events = [
        (rng.choice("lr"), bytes([97 + rng.randrange(4)]), 2 * i + rng.randrange(80), f"id{i}")
        for i in range(600)
    ]
    runs = []
    for eager in (False, True):
        stores = [CachedStore(SortedDictStore(), 5, 2) for _ in range(4)]
        wm = Watermark(stores[3], 100)
        join = StreamStreamJoin(
            *stores[:3], wm, lambda a, b: (a, b), window_before_ms=10, window_after_ms=20, kind="outer"
        )
        out = []
        for side, key, t, rid in events:
            wm.observe(t)
            add = join.add_left if side == "l" else join.add_right
            out += [(r.id, r.value) for r in add(key, t, rid, rid)]
            if eager:
                out += [(r.id, r.value) for r in join.expire()]
        wm.advance_to(10_000)
        out += [(r.id, r.value) for r in join.expire()]
        runs.append(out)
    assert sorted(runs[0]) == sorted(runs[1])
    matched = {i for i, v in runs[0] if None not in v}
    # reference: every in-window pair (disorder < 80 ms stays within the watermark's 100 ms)
    lefts = [(k, t, r) for s, k, t, r in events if s == "l"]
    rights = [(k, t, r) for s, k, t, r in events if s == "r"]
    candidates = {
        f"j:{k.hex()}:{lr}:{rr}"
        for k, lt, lr in lefts
        for k2, rt, rr in rights
        if k == k2 and lt - 10 <= rt <= lt + 20
    }
    assert matched == candidates
    # every record appears in a match or exactly once as unmatched
    unmatched = [i for i, v in runs[0] if None in v]
    assert len(unmatched) == len(set(unmatched))
    in_match = {part for i in matched for part in i.split(":")[2:]}
    assert all(i.split(":")[2] not in in_match and i.split(":")[3] not in in_match for i in unmatched)
    assert in_match | {p for i in unmatched for p in i.split(":")[2:] if p} == {r for *_, r in events}

"""Versioned tables, the event-time stream-table join on them, and stale updates in the
table-table join."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.operators.joins import TableTableJoin  # noqa: E402
from samzapy.operators.key_encoding import MAX_MS  # noqa: E402
from samzapy.operators.temporal_join import EventTimeStreamTableJoin  # noqa: E402
from samzapy.stores.logged import LoggedStore  # noqa: E402
from samzapy.stores.memory import InMemoryStore  # noqa: E402
from samzapy.stores.versioned import Version, VersionedStore  # noqa: E402
from samzapy.testing import CollectingChangelog  # noqa: E402


# ------------------------------------------------------------------ versioned store
def test_get_as_of_returns_the_version_valid_at_that_time_whatever_the_put_order() -> None:
    for order in ([100, 300, 200], [300, 100, 200], [200, 300, 100]):
        table = VersionedStore(SortedDictStore(), history_ms=10_000)
        for t in order:
            table.put(b"k", {"v": t}, t)
        assert table.get(b"k", as_of=99) is None
        assert table.get(b"k", as_of=100) == Version({"v": 100}, 100, 200)
        assert table.get(b"k", as_of=250) == Version({"v": 200}, 200, 300)
        assert table.get(b"k") == Version({"v": 300}, 300, MAX_MS)


def test_a_delete_is_a_version_and_a_later_put_revives_the_key() -> None:
    table = VersionedStore(SortedDictStore(), history_ms=10_000)
    table.put(b"k", "a", 10)
    table.delete(b"k", 20)
    table.put(b"k", "b", 30)
    assert [table.get(b"k", as_of=t) for t in (15, 25)] == [Version("a", 10, 20), None]
    assert table.get(b"k").value == "b"


def test_old_versions_are_purged_and_too_old_puts_refused() -> None:
    store = SortedDictStore()
    table = VersionedStore(store, history_ms=100)
    for t in (0, 50, 120, 260):
        assert table.put(b"k", t, t)
    # history starts at 160: the version valid then (120) stays, older ones are gone
    assert [v.valid_from for v in table.versions(b"k")] == [120, 260]
    assert table.get(b"k", as_of=159) is None  # before the history: no answer
    assert table.get(b"k", as_of=160).value == 120
    assert table.put(b"k", "late", 159) is False
    assert table.put(b"k", "ok", 200) is True
    assert [v.valid_from for v in table.versions(b"k")] == [120, 200, 260]


def test_versions_go_to_the_changelog_and_a_restored_store_answers_the_same() -> None:
    changelog = CollectingChangelog()
    table = VersionedStore(LoggedStore(InMemoryStore(), changelog), history_ms=1000, namespace=b"zv")
    rng = random.Random(5)
    for _ in range(300):
        table.put(rng.choice([b"a", b"b", b"c"]), rng.randrange(100), rng.randrange(0, 5000))
    restored_engine = InMemoryStore()
    restored_engine.put_all(changelog.latest().items())
    restored = VersionedStore(restored_engine, history_ms=1000, namespace=b"zv")
    assert restored.observed_ms == table.observed_ms
    for key in (b"a", b"b", b"c"):
        assert restored.versions(key) == table.versions(key)
        for t in range(3000, 5200, 37):
            assert restored.get(key, as_of=t) == table.get(key, as_of=t)


# ------------------------------------------------------------------ event-time stream-table join
PROFILES = [(b"u1", {"zip": "A"}, 100), (b"u2", {"zip": "X"}, 150), (b"u1", {"zip": "B"}, 300)]
VIEWS = [(b"u1", 50), (b"u1", 120), (b"u2", 200), (b"u1", 310), (b"u1", 299)]


def offline(views: list[tuple[bytes, int]]) -> dict[bytes, object]:
    """ref -> zip of the profile with the largest time <= the view's (None: inner drop)."""
    out = {}
    for i, (user, t) in enumerate(views):
        valid = [(pt, p["zip"]) for u, p, pt in PROFILES if u == user and pt <= t]
        out[f"v{i}".encode()] = max(valid)[1] if valid else None
    return out


def run(schedule: list[tuple[str, int]], grace: int = 0) -> dict[bytes, object]:
    store = SortedDictStore()
    join = EventTimeStreamTableJoin(
        VersionedStore(store, 10_000, namespace=b"t"),
        store,
        lambda view, profile: profile["zip"],
        grace_ms=grace,
        namespace=b"j",
    )
    results = []
    for side, i in schedule:
        if side == "t":
            user, profile, t = PROFILES[i]
            results += join.update_table(user, profile, t)
        elif side == "v":
            user, t = VIEWS[i]
            results += join.join(user, {"t": t}, t, f"v{i}".encode())
        else:
            results += join.end_table()
    assert join.waiting() == 0
    refs = [r.ref for r in results]
    assert len(refs) == len(set(refs)) == len(VIEWS)
    return {r.ref: r.value for r in results}


def test_the_event_time_join_gives_the_same_pairs_for_every_interleaving() -> None:
    tables = [("t", i) for i in range(len(PROFILES))]
    views = [("v", i) for i in range(len(VIEWS))]
    table_first = run([*tables, *views, ("end", 0)])
    views_first = run([*views, *tables, ("end", 0)])
    rng = random.Random(7)
    shuffled = []
    for _ in range(20):  # random merges keeping each input's own order
        a, b, merged = list(tables), list(views), []
        while a or b:
            merged.append((a if a and (not b or rng.random() < 0.5) else b).pop(0))
        shuffled.append(run([*merged, ("end", 0)]))
    assert table_first == views_first == offline(VIEWS)
    assert all(s == table_first for s in shuffled)


def test_grace_waits_for_a_table_update_that_comes_after_a_later_one() -> None:
    store = SortedDictStore()
    join = EventTimeStreamTableJoin(VersionedStore(store, 10_000), store, lambda v, p: p, grace_ms=100)
    join.update_table(b"k", "old", 0)
    assert join.join(b"k", {}, 250, b"r1") == []  # table progress 0: wait
    assert join.update_table(b"k", "newest", 300) == []  # 300 - 100 < 250: still waiting
    released = join.update_table(b"k", "late-but-in-grace", 240)
    assert released == []
    [result] = join.update_table(b"x", "other", 350)
    assert (result.ref, result.value) == (b"r1", "late-but-in-grace")


def test_left_join_releases_views_without_a_profile_with_none() -> None:
    store = SortedDictStore()
    join = EventTimeStreamTableJoin(VersionedStore(store, 10_000), store, lambda v, p: (v, p), kind="left")
    join.update_table(b"k", "p", 10)
    assert [r.value for r in join.join(b"z", "view", 5, b"r")] == [("view", None)]
    with pytest.raises(ValueError, match="kind"):
        EventTimeStreamTableJoin(VersionedStore(store, 1), store, lambda v, p: p, kind="outer")


# ------------------------------------------------------------------ table-table: stale updates
def test_table_table_join_ignores_an_update_older_than_the_version_it_holds() -> None:
    join = TableTableJoin(
        SortedDictStore(), SortedDictStore(), lambda a, b: (a["v"], b["v"]), time_of=lambda e: e["ts"]
    )
    join.update_right(b"k", {"v": "r", "ts": 0}, 0)
    assert join.update_left(b"k", {"v": "new", "ts": 20}, 20).value == ("new", "r")
    assert join.stale("left", b"k", 10)
    assert join.update_left(b"k", {"v": "old", "ts": 10}, 10) is None
    assert join.update_right(b"k", {"v": "r2", "ts": 5}, 5).value == ("new", "r2")

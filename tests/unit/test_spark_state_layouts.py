"""The state-as-data layouts on stores the operators themselves wrote (no broker, no Spark):
every entry decodes into its readable columns, keyed entries name their key, the tasks' own
entries their reshard rule; the rules combine as documented; a reshard refuses what it cannot
move before touching anything; the TTL stamp is RocksDB's. The docstrings' examples run."""

from __future__ import annotations

import doctest
import importlib
import struct
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_operators_support import SortedDictStore  # noqa: E402

from samzapy.operators.dedup import Deduplicator  # noqa: E402
from samzapy.operators.dedup import state_layout as dedup_layout  # noqa: E402
from samzapy.operators.event_time import (  # noqa: E402
    EventTime,
    SequenceDedup,
    StoredCounter,
    counter_entries,
    event_time_entries,
    sequence_entries,
)
from samzapy.operators.fk_join import ForeignKeyRight, Subscription  # noqa: E402
from samzapy.operators.fk_join import state_layouts as fk_layouts  # noqa: E402
from samzapy.operators.key_encoding import encode_ms, encode_u64  # noqa: E402
from samzapy.operators.registry import JoinRegistry, registry_entries  # noqa: E402
from samzapy.operators.state_layout import TaskStateLayout  # noqa: E402
from samzapy.operators.temporal_join import EventTimeStreamTableJoin  # noqa: E402
from samzapy.operators.temporal_join import state_layouts as temporal_layouts  # noqa: E402
from samzapy.operators.window_layout import WindowLayout  # noqa: E402
from samzapy.spark import SparkJobError  # noqa: E402
from samzapy.spark.state_data.reshard_own import feeders, merge, targets  # noqa: E402
from samzapy.stores.memory import InMemoryStore  # noqa: E402
from samzapy.stores.versioned import VersionedStore  # noqa: E402

CONFIG_DIR = Path(__file__).parents[2] / "config"


@pytest.mark.parametrize(
    "name",
    [
        "samzapy.operators.state_layout",
        "samzapy.operators.window_layout",
        "samzapy.operators.stream_join_layout",
        "samzapy.operators.dedup_layout",
        "samzapy.operators.fk_layout",
        "samzapy.operators.versioned_layout",
        "samzapy.operators.temporal_layout",
        "samzapy.store_codec",
        "samzapy.spark.state_data.reshard_own",
        "samzapy.spark.sst",
        "samzapy.spark.state_data.read",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0


def decoded(layout: Any, store: InMemoryStore) -> list[dict[str, Any]]:
    """Every entry of ``store`` as read_state's executors decode it (JSON texts parsed), with
    its partition key and reshard rule."""
    entries = [(e.key, e.value) for e in store.all()]
    rows = []
    for i, (key, value) in enumerate(entries):
        following = entries[i + 1][0] if i + 1 < len(entries) else None
        row = layout.decode(key, value, following)
        rows.append(
            {
                "kind": row["kind"],
                "key": orjson.loads(row["key_json"]),
                "body": orjson.loads(row["value_json"]),
                "partition_key": layout.partition_key(key, value),
                "rule": layout.merge_rule(key, value),
            }
        )
    return rows


def test_dedup_store_decodes_into_ids_buckets_and_max_time() -> None:
    store = SortedDictStore()
    dedup = Deduplicator(store, ttl_ms=4_000, buckets=4, namespace=b"dd")
    for event_id, t in (("a", 1_500), ("b", 2_500), ("a", 2_600)):
        dedup.seen_before(event_id, t)
    rows = decoded(dedup_layout(b"dd"), store)
    assert [(r["kind"], r["key"], r["body"], r["partition_key"], r["rule"]) for r in rows] == [
        ("bucket_entry", "a", {"bucket": 1_000}, None, "copy"),
        ("bucket_entry", "b", {"bucket": 2_000}, None, "copy"),
        ("id", "a", {"bucket": 1_000}, None, "copy"),
        ("id", "b", {"bucket": 2_000}, None, "copy"),
        ("max_time", None, {"time": 2_600}, None, "max"),
    ]


def test_fk_subscriptions_decode_by_foreign_key_and_move_with_it() -> None:
    subscriptions = InMemoryStore()
    right = ForeignKeyRight(InMemoryStore(), subscriptions)
    right.subscribe(Subscription("c1", "o2", 7))
    right.subscribe(Subscription("c1", "o1", 9))
    right.subscribe(Subscription("c\x002", "o3", 4))
    (layout,) = fk_layouts("fk-subscriptions").values()
    rows = decoded(layout, subscriptions)
    assert [(r["key"], r["body"], r["partition_key"]) for r in rows] == [  # in escaped-key order
        ("c\x002", {"left_key": "o3", "version": 4}, b"c\x002"),
        ("c1", {"left_key": "o1", "version": 9}, b"c1"),
        ("c1", {"left_key": "o2", "version": 7}, b"c1"),
    ]
    assert {r["kind"] for r in rows} == {"subscription"}


def version(valid_from: int, valid_to: int | None, value: Any) -> dict[str, Any]:
    return {"valid_from": valid_from, "valid_to": valid_to, "deleted": value is None, "value": value}


def test_event_time_join_store_decodes_versions_with_their_validity_and_waiting_records() -> None:
    store = SortedDictStore()
    table = VersionedStore(store, history_ms=10_000, namespace=b"zv")
    join = EventTimeStreamTableJoin(table, store, lambda v, t: (v, t), grace_ms=100, namespace=b"jb")
    join.update_table(b"u1", "111", 1_000)
    join.update_table(b"u1", "222", 2_000)
    join.update_table(b"u2", None, 1_500)  # a delete
    join.join(b"u1", {"view": 1}, 5_000, b"ref-1")  # waits: the table has reached 2 000 - 100
    (layout,) = temporal_layouts("s", "s", table_namespace=b"zv", buffer_namespace=b"jb").values()
    rows = decoded(layout, store)
    assert [(r["kind"], r["key"], r["body"], r["partition_key"], r["rule"]) for r in rows] == [
        ("buffered", "u1", {"event_time": 5_000, "ref": "ref-1", "record": {"view": 1}}, b"u1", None),
        ("observed_time", None, {"time": 2_000}, None, "min"),
        (
            "version",
            "u1",
            {"valid_from": 1_000, "valid_to": 2_000, "deleted": False, "value": "111"},
            b"u1",
            None,
        ),
        (
            "version",
            "u1",
            {"valid_from": 2_000, "valid_to": None, "deleted": False, "value": "222"},
            b"u1",
            None,
        ),
        (
            "version",
            "u2",
            {"valid_from": 1_500, "valid_to": None, "deleted": True, "value": None},
            b"u2",
            None,
        ),
    ]
    join.end_table()
    ended = [r for r in decoded(layout, store) if r["kind"] == "table_ended"]
    assert [(r["key"], r["body"], r["partition_key"], r["rule"]) for r in ended] == [(None, {}, None, "all")]


def test_unknown_entries_of_a_shared_store_read_as_internal_text_and_have_no_rule() -> None:
    (layout,) = temporal_layouts("s", "s", table_namespace=b"zv", buffer_namespace=b"jb").values()
    row = layout.decode(b"other\x00key", b"\x01v")
    assert (row["kind"], orjson.loads(row["key_json"]), orjson.loads(row["value_json"])) == (
        "internal",
        "other\\x00key",
        {"stored": "\\x01v"},
    )
    assert (layout.partition_key(b"other\x00key", b""), layout.merge_rule(b"other\x00key", b"")) == (
        None,
        None,
    )


def test_the_operators_own_entries_have_the_rules_of_their_kind() -> None:
    store = SortedDictStore()
    time = EventTime(store, ["clicks", "views"], 10)
    time.advance("clicks", 500)
    time.advance("views", 400)
    time.idle("clicks")
    SequenceDedup(store).is_duplicate("3", 17)
    StoredCounter(store, b"\x00late").inc(2)
    JoinRegistry(store, 1_000, namespace=b"reg").try_register("click-1", 450)
    own = (
        *event_time_entries(),
        *sequence_entries(),
        *counter_entries(b"\x00late"),
        *registry_entries(b"reg"),
    )
    rules = {e.key: TaskStateLayout(own).merge_rule(e.key, e.value) for e in store.all()}
    assert rules == {
        b"\x00late": "sum",
        b"et:clicks\x00id": "all",
        b"et:clicks\x00wm": "min",
        b"et:views\x00wm": "min",
        b"et\x00wm": "min",
        b"reg\x00rg" + encode_ms(450) + b"click-1": "copy",
        b"reg\x00ri" + b"click-1": "copy",
        b"reg\x00rm": "max",
        b"sq\x003": "max",
    }
    # in a window store the same entries keep their rules; the windows themselves have keys
    layout = WindowLayout(b"cw", own)
    assert layout.merge_rule(b"et\x00wm", b"") == "min" and layout.merge_rule(b"cw\x00zz", b"") is None


def test_task_own_entries_go_to_the_new_tasks_that_may_receive_the_old_tasks_keys() -> None:
    from samzapy.kafka.partitioner import partition_for_key

    for old_tasks, new_tasks in ((4, 8), (8, 3), (4, 6), (6, 4)):
        moves = {
            (partition_for_key(f"k{i}".encode(), old_tasks), partition_for_key(f"k{i}".encode(), new_tasks))
            for i in range(5_000)
        }
        possible = {(j, k) for k in range(new_tasks) for j in feeders(k, old_tasks, new_tasks)}
        assert moves == possible, (old_tasks, new_tasks)  # exactly the pairs keys take
        for j in range(old_tasks):
            assert {k for k in range(new_tasks) if j in feeders(k, old_tasks, new_tasks)} == set(
                targets(j, "copy", old_tasks, new_tasks)
            )
            (counted,) = targets(j, "sum", old_tasks, new_tasks)
            assert j in feeders(counted, old_tasks, new_tasks)


def test_merge_rules() -> None:
    times = [encode_ms(-5), encode_ms(30), encode_ms(7)]
    assert merge("min", times, 3, 3) == encode_ms(-5)  # signed times sort as their bytes
    assert merge("max", [encode_u64(9), encode_u64(300)], 2, 2) == encode_u64(300)
    assert merge("sum", [encode_u64(2), encode_u64(5)], 2, 2) == encode_u64(7)
    assert merge("copy", [b"\x01a", b"\x02b"], 2, 2) == b"\x02b"
    assert merge("all", [b"1", b"1"], 2, 2) == b"1"
    assert merge("all", [b"1"], 1, 2) is None
    with pytest.raises(SparkJobError, match="unknown merge rule 'avg'"):
        merge("avg", [b""], 1, 1)


def test_the_router_refuses_a_task_own_entry_without_a_rule_naming_store_and_entry() -> None:
    pa = pytest.importorskip("pyarrow")
    from samzapy.spark.state_data.reshard import _Router

    batch = pa.RecordBatch.from_pydict(
        {"store": ["join-state"], "partition": [2], "key_bytes": [b"x\x00y"], "value_bytes": [b"1"]}
    )
    with pytest.raises(
        SparkJobError, match=r"store 'join-state' holds the entry x\\x00y that belongs to no key"
    ):
        list(_Router({"join-state": TaskStateLayout(event_time_entries())}, 3)([batch]))
    # an entry with a rule goes to no task yet: it carries its old task and its rule
    batch = pa.RecordBatch.from_pydict(
        {"store": ["s"], "partition": [2], "key_bytes": [b"et\x00wm"], "value_bytes": [encode_ms(5)]}
    )
    (row,) = next(_Router({"s": TaskStateLayout(event_time_entries())}, 3)([batch])).to_pylist()
    assert (row["partition"], row["rule"], row["old"]) == (-1, "min", 2)


def test_reshard_refuses_the_foreign_key_join_before_changing_anything() -> None:
    from samzapy.spark.state_data.reshard import reshard

    with pytest.raises(SparkJobError, match="store 'fk-subscriptions' cannot be resharded: the foreign-key"):
        reshard(CONFIG_DIR / "order-customer-join.properties", 3)


def test_ttl_stamp_is_what_rocksdb_ttl_mode_appends(tmp_path: Path) -> None:
    from rocksdict import AccessType, Options, Rdict

    from samzapy.spark.sst import ttl_stamp
    from samzapy.stores.rocksdb import open_rdict
    from samzapy.stores.rocksdb_options import RocksDBOptions

    db = open_rdict(tmp_path / "db", RocksDBOptions(ttl_ms=3_600_000))
    before = ttl_stamp()
    db[b"k"] = b"value"
    after = ttl_stamp()
    db.close()
    raw = Rdict(str(tmp_path / "db"), options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        stored = raw[b"k"]
    finally:
        raw.close()
    assert stored[:-4] == b"value"
    (written,), (low,), (high,) = (struct.unpack("<i", b) for b in (stored[-4:], before, after))
    assert low - 1 <= written <= high  # RocksDB's clock may lag Python's by a tick (a coarse clock)

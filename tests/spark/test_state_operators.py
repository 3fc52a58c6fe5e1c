"""read_state of the operators' other stores on the dev broker and real RocksDB: a dedup job's
store, the foreign-key join's four stores and the event-time join's versioned table with its
waiting views equal what ``read-rocksdb-tool scan`` shows for every key, from the changelogs
and from disk, and decode into readable columns that match the inputs exactly."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
from state_support import (
    DAY,
    GRACE,
    HALF,
    dedup_config,
    enrich_job,
    events,
    raw_of,
    rows_of,
    run_counting,
    scan,
    scanned_bytes,
    timed_views,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support, test_jobs_fk_join

import test_jobs_fk_join as fk  # noqa: E402
from jobs_support import run_to_end  # noqa: E402

from samzapy.generate import produce_json  # noqa: E402
from samzapy.kafka.partitioner import partition_for_key  # noqa: E402
from samzapy.operators.key_encoding import decode_ms, decode_u64, unescape  # noqa: E402
from samzapy.spark.state_data.read import read_state  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 4


def canonical(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def test_dedup_store_reads_as_ids_buckets_and_max_time_equal_to_the_scan(tmp_path, broker, spark):
    name = f"dedup-{tmp_path.name[-12:]}"
    records = events(500, resent=80, seed=9)
    produce_json(broker, f"{name}-in", PARTITIONS, records)
    config = dedup_config(tmp_path, broker, name)
    run_counting(config, tmp_path / "metrics.json")
    base = tmp_path / name
    scanned = scanned_bytes(config, base, "seen")

    bucket_ms = 10 * DAY  # the ttl over the task's 4 buckets
    want: dict[int, dict] = defaultdict(lambda: {"id": {}, "max_time": None})
    for key, event in records:  # what each task saw: its ids' first buckets, its largest time
        task = want[partition_for_key(key, PARTITIONS)]
        task["id"].setdefault(event["event_id"], event["ts"] - event["ts"] % bucket_ms)
        task["max_time"] = max(task["max_time"] or 0, event["ts"])
    assert len({e for t in want.values() for e in t["id"]}) == 500

    for source in ("changelog", "disk"):
        rows = rows_of(read_state(spark, config, "seen", source=source, raw=True))
        assert raw_of(rows) == scanned, source
        assert set(rows[0]) >= {"store", "task", "partition", "kind", "key", "bucket", "time"}
        got: dict[int, dict] = defaultdict(lambda: {"id": {}, "bucket_entry": {}, "max_time": None})
        for row in rows:
            key, value = bytes(row["key_bytes"]), bytes(row["value_bytes"])
            task = got[row["partition"]]
            if row["kind"] == "max_time":
                assert (row["key"], row["time"], row["bucket"]) == (None, decode_ms(value), None)
                task["max_time"] = row["time"]
            elif row["kind"] == "id":
                assert key == b"dd\x00di" + row["key"].encode() and row["bucket"] == decode_ms(value)
                task["id"][row["key"]] = row["bucket"]
            else:
                assert row["kind"] == "bucket_entry" and value == b""
                assert (key[:5], key[13:]) == (b"dd\x00db", row["key"].encode())
                assert row["bucket"] == decode_ms(key, 5)
                task["bucket_entry"][row["key"]] = row["bucket"]
        for partition, task in want.items():
            assert got[partition]["id"] == task["id"], (source, partition)
            assert got[partition]["bucket_entry"] == task["id"], (source, partition)
            assert got[partition]["max_time"] == task["max_time"], (source, partition)


def test_foreign_key_join_stores_read_as_columns_equal_to_the_scan(tmp_path, broker, spark):
    records = fk.script(seed=5, steps=900)
    tag = f"rs-fk-{tmp_path.name[-8:]}"
    config, topics = fk.setup(tmp_path, broker, tag)
    fk.produce_script(broker, topics, records)
    fk.run_until_settled(config, broker, topics)
    base = tmp_path / f"state-order-customer-join-{tag}"
    latest: dict[str, dict] = {"orders": {}, "customers": {}}
    for table, key, value in records:
        latest[table][key.decode()] = value
    orders = {k: v for k, v in latest["orders"].items() if v is not None}
    customers = {k: v for k, v in latest["customers"].items() if v is not None}
    joined = {k: v for k, v in fk.expected_table(records).items() if v is not None}

    for store in ("fk-left", "fk-right", "joined"):  # key-value stores of string keys, JSON values
        scanned = sorted((e["partition"], e["key"], canonical(e["value"])) for e in scan(config, base, store))
        for source in ("changelog", "disk"):
            rows = rows_of(read_state(spark, config, store, source=source, raw=True))
            got = sorted((r["partition"], r["key"], canonical(orjson.loads(r["value_bytes"]))) for r in rows)
            assert got == scanned, (store, source)
            by_key = {r["key"]: r for r in rows}
            if store == "fk-left":
                assert {k: (r["fk"], r["value"]) for k, r in by_key.items()} == {
                    k: (v["customer_id"], v) for k, v in orders.items()
                }
            elif store == "fk-right":
                assert {k: r["value"] for k, r in by_key.items()} == customers
            else:
                fields = ("order_id", "order", "customer")
                assert {k: {f: r[f] for f in fields} for k, r in by_key.items()} == joined

    versions = {r["key"]: r["version"] for r in rows_of(read_state(spark, config, "fk-left"))}
    scanned = scanned_bytes(config, base, "fk-subscriptions")
    for source in ("changelog", "disk"):
        rows = rows_of(read_state(spark, config, "fk-subscriptions", source=source, raw=True))
        assert raw_of(rows) == scanned, source
        for row in rows:  # the stored bytes, decoded by hand
            key, value = bytes(row["key_bytes"]), bytes(row["value_bytes"])
            customer, offset = unescape(key, 3)
            assert key[:3] == b"\x00fk" and row["kind"] == "subscription"
            assert (row["key"], row["left_key"], row["version"]) == (
                customer.decode(),
                key[offset:].decode(),
                decode_u64(value),
            )
            assert row["partition"] == partition_for_key(customer, PARTITIONS)  # the customer's task
        subscribed = {(r["key"], r["left_key"]): r["version"] for r in rows}
        assert subscribed == {(o["customer_id"], k): versions[k] for k, o in orders.items()}, source


def test_versioned_table_and_waiting_views_read_as_versions_equal_to_the_scan(tmp_path, broker, spark):
    """Half the profiles (no end of the table stream), then views: the versions read with their
    validity; the views later than each task's table progress minus the grace wait."""
    tag = f"rs-ver-{tmp_path.name[-8:]}"
    config, topics = enrich_job(tmp_path, broker, tag)
    waiting_views = timed_views(400, seed=3)
    produce_json(broker, topics["profiles"], PARTITIONS, HALF)
    produce_json(broker, topics["views"], PARTITIONS, waiting_views)
    run_to_end(config)  # the profiles are a bootstrap stream: all of them before any view
    base = tmp_path / f"state-pageview-enrich-event-time-{tag}"
    scanned = scanned_bytes(config, base, "zip-versions")

    history: dict[str, list[tuple[int, str]]] = defaultdict(list)
    observed: dict[int, int] = {}
    for key, profile in HALF:
        history[key.decode()].append((profile["updated_at"], profile["zip"]))
        p = partition_for_key(key, PARTITIONS)
        observed[p] = max(observed.get(p, 0), profile["updated_at"])
    want_versions = {}  # (user, valid_from) -> (valid_to: the next version's time, zip)
    for user, versions in history.items():
        for i, (t, zip_code) in enumerate(versions):
            following = versions[i + 1][0] if i + 1 < len(versions) else None
            want_versions[(user, t)] = (following, zip_code)
    want_waiting = {
        v["view_id"]: (key.decode(), v["ts"], v)
        for key, v in waiting_views
        if v["ts"] > observed[partition_for_key(key, PARTITIONS)] - GRACE
    }
    assert 50 < len(want_waiting) < 350

    for source in ("changelog", "disk"):
        rows = rows_of(read_state(spark, config, "zip-versions", source=source, raw=True))
        assert raw_of(rows) == scanned, source
        by_kind: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            by_kind[row["kind"]].append(row)
            if row["key"] is not None and row["kind"] != "observed_time":
                assert row["partition"] == partition_for_key(row["key"].encode(), PARTITIONS)
        assert set(by_kind) == {"version", "observed_time", "buffered"}
        versions = {(r["key"], r["valid_from"]): (r["valid_to"], r["value"]) for r in by_kind["version"]}
        assert versions == want_versions, source
        assert not any(r["deleted"] for r in by_kind["version"])
        assert {r["partition"]: r["time"] for r in by_kind["observed_time"]} == observed
        buffered = by_kind["buffered"]
        waiting = {r["record"]["view_id"]: (r["key"], r["event_time"], r["record"]) for r in buffered}
        assert waiting == want_waiting, source
        for row in by_kind["buffered"]:  # the ref the join hands back: the view's origin
            assert row["ref"].startswith(f"Partition {row['partition']}:{topics['views']}:")
            key = bytes(row["key_bytes"])
            assert key.startswith(b"jb\x00jb") and decode_ms(key, 5) == row["event_time"]

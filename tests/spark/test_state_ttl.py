"""Stores with ``rocksdb.ttl.ms`` through the state-as-data paths on the dev broker: read_state
shows the values the job reads (not RocksDB's write time), write_state and migrate_state write
them as the TTL mode stores them (value + 4-byte write time on disk, the value alone in the
changelog), and the job adopts the written stores without a replay and counts on exactly."""

from __future__ import annotations

import struct
import time

import orjson
import pytest
from state_support import (
    PARTITIONS,
    changelog_state,
    counting_config,
    last_counts,
    produce_views,
    restored,
    rows_of,
    run_counting,
    scan,
    views,
)
from support import create_topic, read_store

from samzapy.spark.state_data.migrate import migrate_state
from samzapy.spark.state_data.read import read_state
from samzapy.spark.state_data.write import write_state

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TTL = {"stores.counts.rocksdb.ttl.ms": str(7 * 86_400_000)}


def stamped(base, store: str = "counts") -> dict[str, tuple[int, int]]:
    """Each key's (count, write time in s) as RocksDB holds them on disk: the JSON value, then
    the TTL mode's 4-byte little-endian write time (a raw read-only open keeps it)."""
    raw = read_store(base, store, value_decode=bytes)
    return {k: (orjson.loads(v[:-4]), struct.unpack("<i", v[-4:])[0]) for k, v in raw.items()}


def test_ttl_store_round_trips_through_read_write_and_migrate(tmp_path, broker, spark):
    tag = tmp_path.name[-12:]
    old, new = f"ttl-old-{tag}", f"ttl-new-{tag}"
    create_topic(broker, f"{new}-in", PARTITIONS)
    counts = produce_views(broker, f"{old}-in", PARTITIONS, views(500, 30, seed=1))
    old_config = counting_config(tmp_path, broker, old, f"{old}-in", **TTL)
    new_config = counting_config(tmp_path, broker, new, f"{new}-in", **TTL)
    run_counting(old_config, tmp_path / "old.json")
    job_written = stamped(tmp_path / old)  # the job's own TTL store: the format to match
    assert {k: n for k, (n, _) in job_written.items()} == dict(counts)

    scanned = {e["key"]: e["value"] for e in scan(old_config, tmp_path / old, "counts")}
    assert scanned == dict(counts)
    for source in ("changelog", "disk"):  # the values the job reads, not the stamped bytes
        rows = rows_of(read_state(spark, old_config, "counts", source=source, raw=True))
        assert {r["key"]: r["value"] for r in rows} == scanned, source
        assert {r["key"]: orjson.loads(r["value_bytes"]) for r in rows} == scanned, source

    before = int(time.time())
    frame = read_state(spark, old_config, "counts").select("key", "value")
    stats = write_state(frame, new_config, "counts")
    after = int(time.time())
    assert stats.keys == len(counts) == 30
    written = stamped(tmp_path / new)
    assert {k: n for k, (n, _) in written.items()} == dict(counts)
    assert all(before <= t <= after for _, t in written.values())  # the time of the write
    assert changelog_state(broker, f"{new}-changelog") == changelog_state(broker, f"{old}-changelog")

    more = produce_views(broker, f"{new}-in", PARTITIONS, views(200, 40, seed=2))
    counts.update(more)
    snapshot = run_counting(new_config, tmp_path / "new.json")
    assert restored(snapshot) == 0  # the TTL store written as SSTs was adopted as it is
    assert last_counts(broker, f"{new}-out") == {u: counts[u] for u in more}
    assert {k: n for k, (n, _) in stamped(tmp_path / new).items()} == dict(counts)

    before = int(time.time())
    migrated = migrate_state(new_config, "counts", lambda user, n: n * 10, spark=spark)
    after = int(time.time())
    assert migrated.keys == len(counts)
    on_disk = stamped(tmp_path / new)
    assert {k: n for k, (n, _) in on_disk.items()} == {u: n * 10 for u, n in counts.items()}
    assert all(before <= t <= after for _, t in on_disk.values())
    final = changelog_state(broker, f"{new}-changelog")
    assert {u: n for kv in final.values() for u, n in kv.items()} == {u: n * 10 for u, n in counts.items()}

    last = produce_views(broker, f"{new}-in", PARTITIONS, views(100, 40, seed=3))
    snapshot = run_counting(new_config, tmp_path / "migrated.json")
    assert restored(snapshot) == 0
    expected = {u: counts[u] * 10 + n for u, n in last.items()}
    assert {u: c for u, c in last_counts(broker, f"{new}-out").items() if u in last} == expected

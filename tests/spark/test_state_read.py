"""read_state and ``state-storage-tool export`` against the dev broker and real RocksDB: every key
of the page-view counter's window store and of the table-table join's stores, from the
changelogs and from disk, equals what ``read-rocksdb-tool scan`` shows."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import fastavro
import orjson
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from jobs_support import job_config, run_to_end  # noqa: E402
from support import create_topic  # noqa: E402

from samzapy.generate import produce_json, profiles, settings  # noqa: E402
from samzapy.operators.window_layout import decode_fixed_key  # noqa: E402
from samzapy.spark.state_data.read import read_state  # noqa: E402
from samzapy.store_codec import escaped_text  # noqa: E402
from samzapy.tools.read_rocksdb import main as read_rocksdb_tool  # noqa: E402
from samzapy.tools.state_storage import main as state_storage_tool  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 4
HOUR = 3_600_000
START = 1_700_000_000_000 - 1_700_000_000_000 % HOUR


def views(count: int, users: int, seed: int) -> list[tuple[bytes, dict]]:
    """Page views keyed by user over 3 hours, in time order (the last windows stay open)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        user = f"user-{rng.randrange(users):03d}"
        ts = START + i * 3 * HOUR // count
        out.append((user.encode(), {"user_id": user, "ts": ts, "view_id": f"v{i}"}))
    return out


def scan(config: Path, base: Path, store: str) -> list[dict]:
    """``read-rocksdb-tool scan --format json`` of every partition of ``store``."""
    args = ["scan", "--config-path", str(config), "--db-path", str(base), "--db-name", store]
    result = CliRunner().invoke(read_rocksdb_tool, [*args, "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in result.output.splitlines() if line.strip()]


def b64(data: bytes) -> dict:
    import base64

    return {"$base64": base64.b64encode(data).decode()}


def rows_of(frame) -> list[dict]:
    return [r.asDict(recursive=True) for r in frame.collect()]


def counter_job(tmp_path: Path, broker: str, tag: str) -> Path:
    topic = f"views-{tag}"
    create_topic(broker, topic, PARTITIONS)
    produce_json(broker, topic, PARTITIONS, views(1_500, 25, seed=3))
    config = job_config(
        tmp_path,
        broker,
        "pageview-counter.properties",
        tag,
        {
            "task.inputs": f"kafka.{topic}",
            "window.output.stream": f"kafka.counts-{tag}",
            "window.late.stream": f"kafka.late-{tag}",
            "watermark.upstream.tasks": "0",
        },
    )
    run_to_end(config)
    return config


def test_window_store_reads_as_windows_equal_to_the_scan_from_changelog_and_disk(
    tmp_path, broker, spark, topic_name
):
    tag = f"rs-pv-{abs(hash(topic_name)) % 10**6}"
    config = counter_job(tmp_path, broker, tag)
    base = tmp_path / f"state-pageview-counter-{tag}"
    scanned = scan(config, base, "pageview-counts")
    want = sorted((e["partition"], e["key"]["$base64"], e["value"]["$base64"]) for e in scanned)
    windows = [e for e in scanned if b"cw\x00wt" in _bytes(e["key"])]
    assert len(windows) > 20, "the test data should leave open windows"

    for source in ("changelog", "disk"):
        rows = rows_of(read_state(spark, config, "pageview-counts", source=source, raw=True))
        got = sorted(
            (r["partition"], b64(r["key_bytes"])["$base64"], b64(r["value_bytes"])["$base64"]) for r in rows
        )
        assert got == want, source
        by_key = {bytes(r["key_bytes"]): r for r in rows}
        for entry in windows:
            stored = _bytes(entry["key"])
            user, start, end = decode_fixed_key(stored, len(b"cw\x00wt"))
            row = by_key[stored]
            assert (row["kind"], row["key"], row["window_start"], row["window_end"]) == (
                "window",
                user.decode(),
                start,
                end,
            )
            assert row["aggregate"] == orjson.loads(_bytes(entry["value"]))
            assert row["task"] == f"Partition {entry['partition']}"
        assert {r["kind"] for r in rows} == {"window", "internal"}
        for row in rows:
            if row["kind"] == "internal":  # the task's watermarks and counters, as text
                assert (row["key"], row["value"]) == (
                    escaped_text(row["key_bytes"]),
                    escaped_text(row["value_bytes"]),
                )
                assert row["aggregate"] is None


def _bytes(marked: dict) -> bytes:
    import base64

    return base64.b64decode(marked["$base64"])


def test_join_stores_read_as_columns_equal_to_the_scan_and_export_as_parquet_avro_json(
    tmp_path, broker, spark, topic_name
):
    tag = f"rs-join-{abs(hash(topic_name)) % 10**6}"
    topics = {name: f"{name}-{tag}" for name in ("profiles", "settings", "changes", "table")}
    produce_json(broker, topics["profiles"], PARTITIONS, profiles(300, 40, seed=1, delete_fraction=0.1))
    produce_json(broker, topics["settings"], PARTITIONS, settings(300, 40, seed=2, delete_fraction=0.1))
    config = job_config(
        tmp_path,
        broker,
        "profile-settings-join.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['settings']}",
            "join.left.stream": topics["profiles"],
            "join.right.stream": topics["settings"],
            "join.output.stream": f"kafka.{topics['changes']}",
            "stores.joined.changelog": f"kafka.{topics['table']}",
        },
    )
    run_to_end(config)
    base = tmp_path / f"state-profile-settings-join-{tag}"
    for store in ("profiles", "settings", "joined"):
        scanned = scan(config, base, store)
        assert len(scanned) > 10, store
        want = sorted(
            (e["partition"], e["key"], orjson.dumps(e["value"], option=orjson.OPT_SORT_KEYS)) for e in scanned
        )
        for source in ("changelog", "disk"):
            rows = rows_of(read_state(spark, config, store, source=source, raw=True))
            got = sorted(
                (
                    r["partition"],
                    r["key"],
                    orjson.dumps(orjson.loads(r["value_bytes"]), option=orjson.OPT_SORT_KEYS),
                )
                for r in rows
            )
            assert got == want, (store, source)
            for row in rows:  # the value's fields are columns
                value = orjson.loads(row["value_bytes"])
                columns = {k: v for k, v in row.items() if k not in ("store", "task", "partition", "key")}
                columns = {k: v for k, v in columns.items() if k not in ("key_bytes", "value_bytes")}
                assert _no_nulls(columns) == _no_nulls(value), (store, source, row["key"])

    keys = {e["key"] for e in scan(config, base, "joined")}
    for fmt in ("parquet", "avro", "json"):
        out = tmp_path / f"export-{fmt}"
        args = [
            "export",
            "--config-path",
            str(config),
            "--store",
            "joined",
            "--format",
            fmt,
            "--path",
            str(out),
        ]
        result = CliRunner().invoke(state_storage_tool, args)
        assert result.exit_code == 0, result.output
        assert f"exported {len(keys):,} keys" in result.output
        assert _exported_keys(out, fmt) == keys, fmt


def _no_nulls(value):
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _exported_keys(out: Path, fmt: str) -> set[str]:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return set(pq.read_table(out).column("key").to_pylist())
    if fmt == "avro":
        keys = set()
        for path in out.glob("part-*.avro"):
            with open(path, "rb") as f:
                keys |= {r["key"] for r in fastavro.reader(f)}
        return keys
    return {
        orjson.loads(line)["key"]
        for path in out.glob("part-*.json")
        for line in path.read_text().splitlines()
    }


def test_stream_join_buffers_read_as_records_equal_to_the_scan(tmp_path, broker, spark, topic_name):
    """The ad-click join (store layout 2) stopped before the end of its streams: its buffered
    clicks and impressions and its pending index read as records, the index's layout marker as
    internal; its own state (watermarks) as internal text."""
    from samzapy.generate import AdSpec, ads
    from samzapy.operators.key_encoding import decode_ms
    from samzapy.operators.stream_join_layout import LAYOUT_KEY, META, parse_buffer_key

    tag = f"rs-ad-{abs(hash(topic_name)) % 10**6}"
    topics = {name: f"{name}-{tag}" for name in ("impressions", "clicks", "joined", "unjoined")}
    impressions, clicks = ads(AdSpec(impressions=400, orphan_clicks=10, seed=4))
    produce_json(broker, topics["impressions"], PARTITIONS, impressions)
    produce_json(broker, topics["clicks"], PARTITIONS, clicks)
    config = job_config(
        tmp_path,
        broker,
        "ad-click-join.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['impressions']},kafka.{topics['clicks']}",
            "join.clicks.stream": topics["clicks"],
            "join.impressions.stream": topics["impressions"],
            "join.output.stream": f"kafka.{topics['joined']}",
            "join.unjoined.stream": f"kafka.{topics['unjoined']}",
        },
    )
    run_to_end(config)  # no end-of-stream: records of the last window stay buffered
    base = tmp_path / f"state-ad-click-join-{tag}"
    for store in ("click-buffer", "impression-buffer", "join-expiry", "join-state"):
        scanned = scan(config, base, store)
        assert scanned, store
        rows = rows_of(read_state(spark, config, store, raw=True))
        got = sorted((r["partition"], bytes(r["key_bytes"]), bytes(r["value_bytes"])) for r in rows)
        assert got == sorted((e["partition"], _bytes(e["key"]), _bytes(e["value"])) for e in scanned), store
        for row in rows:
            key, value = bytes(row["key_bytes"]), bytes(row["value_bytes"])
            if store == "join-state":
                assert (row["key"], row["value"]) == (escaped_text(key), escaped_text(value))
                continue
            if key.startswith(META):
                assert row["kind"] == "internal" and key in (LAYOUT_KEY, META + b"max-decided")
                continue
            user, at, record_id = parse_buffer_key(key[9:] if store == "join-expiry" else key)
            assert row["key"] == user.decode()
            assert (row["event_time"], row["record_id"]) == (at, record_id.decode())
            if store == "join-expiry":
                assert (row["close_at"], row["side"]) == (decode_ms(key), key[8:9].decode())
            else:
                assert row["matched"] == (value[:1] != b"\x00")
                assert row["decided"] == (value[:1] == b"\x02")
                assert _no_nulls(row["value"]) == _no_nulls(orjson.loads(value[1:]))

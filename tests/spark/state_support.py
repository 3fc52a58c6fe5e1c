"""Helpers of the state-as-data tests: a counting job keyed by user, its inputs and its state."""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))  # jobs_support

from jobs_support import job_config  # noqa: E402
from support import consume_all, create_topic, metric_sum, read_metrics, run_job, write_config  # noqa: E402

from samzapy.generate import produce_json, profiles  # noqa: E402
from samzapy.kafka.admin import TopicAdmin  # noqa: E402

PARTITIONS = 4


def views(count: int, users: int, seed: int) -> list[tuple[bytes, dict]]:
    """Page views keyed by user (so that each user's count lives in one task)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        user = f"user-{rng.randrange(users):03d}"
        out.append((user.encode(), {"user_id": user, "view_id": f"{seed}-{i}"}))
    return out


def produce_views(broker: str, topic: str, partitions: int, records: list[tuple[bytes, dict]]) -> Counter:
    """Produce the views; their count per user."""
    produce_json(broker, topic, partitions, records)
    return Counter(view["user_id"] for _, view in records)


def counting_config(tmp_path: Path, broker: str, name: str, source: str, **extra: str) -> Path:
    """A job of ``spark_tasks:CountingTask`` (store ``counts``: string -> JSON count)."""
    return write_config(
        tmp_path / f"{name}.properties",
        {
            "job.name": name,
            "task.class": "spark_tasks:CountingTask",
            "task.inputs": f"kafka.{source}",
            "task.commit.ms": "500",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.producer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "json",
            "stores.counts.changelog": f"kafka.{name}-changelog",
            "job.logged.store.base.dir": str(tmp_path / name),
            "app.output": f"kafka.{name}-out",
            **extra,
        },
    )


def run_counting(config: Path, metrics: Path) -> dict:
    """Run the job to the end of its input; its metrics snapshot."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    result = run_job(config, "--exit-at-end", "--metrics-file", str(metrics), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return read_metrics(metrics)


def restored(snapshot: dict, store: str = "counts") -> int:
    """Changelog records the job replayed at start into ``store``."""
    return metric_sum(snapshot, f"store.{store}.", "restored-messages")


def changelog_state(broker: str, topic: str) -> dict[int, dict[str, int]]:
    """Per changelog partition, the last value per key (tombstones applied), decoded."""
    state: dict[int, dict[bytes, bytes | None]] = {}
    for record in consume_all(broker, topic):
        state.setdefault(record.partition, {})[record.key] = record.value
    return {
        p: {k.decode(): orjson.loads(v) for k, v in kv.items() if v is not None} for p, kv in state.items()
    }


def last_counts(broker: str, topic: str) -> dict[str, int]:
    """The last count the job sent per user (its output)."""
    last: dict[str, int] = {}
    for record in consume_all(broker, topic):
        message = orjson.loads(record.value)
        last[message["user_id"]] = max(last.get(message["user_id"], 0), message["count"])
    return last


def scan(config: Path, base: Path, store: str) -> list[dict]:
    """``read-rocksdb-tool scan --format json`` of every partition of ``store`` on disk."""
    from click.testing import CliRunner

    from samzapy.tools.read_rocksdb import main as read_rocksdb_tool

    args = ["scan", "--config-path", str(config), "--db-path", str(base), "--db-name", store]
    result = CliRunner().invoke(read_rocksdb_tool, [*args, "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in result.output.splitlines() if line.strip()]


def scanned_bytes(config: Path, base: Path, store: str) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every entry of a bytes store (no serdes), as the scan shows
    them, sorted."""
    entries = scan(config, base, store)
    return sorted((e["partition"], unbase64(e["key"]), unbase64(e["value"])) for e in entries)


def unbase64(marked: dict) -> bytes:
    """The bytes of a ``{"$base64": ...}`` JSON value."""
    import base64

    return base64.b64decode(marked["$base64"])


def rows_of(frame) -> list[dict]:
    """The rows of a DataFrame as dicts."""
    return [r.asDict(recursive=True) for r in frame.collect()]


def raw_of(rows: list[dict]) -> list[tuple[int, bytes, bytes]]:
    """(partition, key bytes, value bytes) of read_state rows read with ``raw=True``, sorted."""
    return sorted((r["partition"], bytes(r["key_bytes"]), bytes(r["value_bytes"])) for r in rows)


def recreate(broker: str, topic: str, partitions: int) -> None:
    """The topic with a new partition count (the dev broker cannot add partitions)."""
    with TopicAdmin(broker) as admin:
        admin.delete_topic(topic)
    create_topic(broker, topic, partitions)


GRACE = 60_000
PROFILES = list(profiles(600, 50, seed=71))  # one update a second, in order
HALF = PROFILES[:300]


def timed_views(count: int, seed: int) -> list[tuple[bytes, dict]]:
    """Views over the profiles' ten minutes, keyed by user (some before any profile)."""
    rng = random.Random(seed)
    first = PROFILES[0][1]["updated_at"]
    out = []
    for i in range(count):
        user = f"user-{rng.randrange(50)}"
        view = {"user_id": user, "view_id": f"v{i}", "ts": first - 30_000 + rng.randrange(660_000)}
        out.append((user.encode(), view))
    return out


def enrich_job(tmp_path: Path, broker: str, tag: str, partitions: int = PARTITIONS) -> tuple[Path, dict]:
    """The event-time enrichment job (config/pageview-enrich-event-time.properties) on test
    topics (``profiles``, ``views``, ``enriched``)."""
    topics = {n: f"{n}-{tag}" for n in ("profiles", "views", "enriched")}
    for name in ("profiles", "views"):
        create_topic(broker, topics[name], partitions)
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich-event-time.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['profiles']},kafka.{topics['views']}",
            "join.table.stream": topics["profiles"],
            f"systems.kafka.streams.{topics['profiles']}.samza.bootstrap": "true",
            "join.output.stream": f"kafka.{topics['enriched']}",
            "join.grace.ms": str(GRACE),
        },
    )
    return config, topics


DAY = 86_400_000


def events(
    count: int, resent: int, seed: int, first: int = 0, start: int = 1_700_000_000_000
) -> list[tuple[bytes, dict]]:
    """Events ``e<first>``... keyed by user, a second apart, and ``resent`` copies of earlier
    ones (same key, same bytes) later in the stream."""
    rng = random.Random(seed)
    out: list[tuple[bytes, dict]] = []
    for i in range(count):
        user = f"user-{rng.randrange(30):02d}"
        out.append((user.encode(), {"user_id": user, "event_id": f"e{first + i}", "ts": start + i * 1000}))
        if i > 10 and rng.random() < resent / count:
            out.append(out[rng.randrange(len(out) - 1)])
    return out


def dedup_config(tmp_path: Path, broker: str, name: str) -> Path:
    """A job of ``spark_tasks:DedupTask`` reading ``<name>-in`` (its store ``seen`` keeps every id)."""
    return write_config(
        tmp_path / f"{name}.properties",
        {
            "job.name": name,
            "task.class": "spark_tasks:DedupTask",
            "task.inputs": f"kafka.{name}-in",
            "task.commit.ms": "500",
            "systems.kafka.consumer.bootstrap.servers": broker,
            "systems.kafka.producer.bootstrap.servers": broker,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "json",
            "systems.kafka.samza.offset.default": "oldest",
            "stores.seen.factory": "rocksdb",
            "stores.seen.changelog": f"kafka.{name}-changelog",
            "job.logged.store.base.dir": str(tmp_path / name),
            "app.output": f"kafka.{name}-out",
            "app.dedup.ttl.ms": str(40 * DAY),  # nothing expires: every id is still there
        },
    )

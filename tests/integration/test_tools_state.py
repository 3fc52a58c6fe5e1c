"""state-storage-tool and read-rocksdb-tool against the real dev broker, real RocksDB and real
job subprocesses (tests/integration/tools_tasks.py:KeyValueTask)."""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from support import (
    create_topic,
    job_env,
    metric_sum,
    produce,
    read_metrics,
    run_job,
    start_job,
    wait_for,
    write_config,
)

from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.tools.common import ToolChangelog
from samzapy.tools.read_rocksdb import main as read_tool
from samzapy.tools.reader import RocksDbKeyValueReader
from samzapy.tools.state_storage import main as state_tool

pytestmark = pytest.mark.integration

PARTITIONS = 2
STORES = ("kv", "counts")


class Model:
    """What the job's stores must hold after a sequence of input messages."""

    def __init__(self) -> None:
        self.kv: dict[str, dict] = {}
        self.counts: dict[str, int] = defaultdict(int)

    def apply(self, key: str, message: dict) -> None:
        if message.get("del"):
            self.kv.pop(key, None)
        else:
            self.kv[key] = message
        self.counts[key] += 1


def messages(rng: random.Random, n: int, keys: int, start: int = 0) -> list[tuple[str, dict]]:
    """Overwrites (few keys, many messages) and deletes (tombstones in the changelog)."""
    return [
        (f"k{rng.randrange(keys):03d}", {"del": True} if rng.random() < 0.15 else {"seq": start + i})
        for i in range(n)
    ]


def send(broker: str, topic: str, batch: list[tuple[str, dict]], model: Model) -> None:
    produce(broker, topic, [(k.encode(), orjson.dumps(m)) for k, m in batch])
    for key, message in batch:
        model.apply(key, message)


def job_config(tmp_path: Path, broker: str, name: str, state: Path, **extra: Any) -> Path:
    props = {
        "job.name": name,
        "task.class": "tools_tasks:KeyValueTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "300",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.producer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "json",
        f"systems.kafka.streams.{name}-in.samza.offset.default": "oldest",
        "stores.kv.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
        "stores.kv.key.serde": "string",
        "stores.kv.msg.serde": "json",
        "stores.kv.changelog": f"kafka.{name}-kv-changelog",
        "stores.kv.object.cache.size": "0",  # every put and delete reaches the changelog
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "job.logged.store.base.dir": str(state),
        **extra,
    }
    return write_config(tmp_path / f"{name}-{state.name}.properties", props)


def contents(config: Path, base: Path, store: str) -> dict[Any, Any]:
    """Every entry of a store, over all partitions, deserialised."""
    with RocksDbKeyValueReader(store, base, config) as reader:
        return dict(reader.scan())


def digest(config: Path, base: Path) -> str:
    """A hash of the sorted raw items of every store partition under ``base``."""
    h = hashlib.sha256()
    for store in STORES:
        with RocksDbKeyValueReader(store, base, config) as reader:
            for partition, key, value in reader.scan_raw():
                h.update(b"%d|%s|%s;" % (partition, key.hex().encode(), value.hex().encode()))
    return h.hexdigest()


def assert_model(config: Path, base: Path, model: Model) -> None:
    assert contents(config, base, "kv") == model.kv
    assert contents(config, base, "counts") == dict(model.counts)


def changelog_ends(broker: str, name: str) -> dict[tuple[str, int], int]:
    ends = {}
    for store in STORES:
        for p in range(PARTITIONS):
            changelog = ToolChangelog(f"{name}-{store}-changelog", p, None, broker)  # read-only
            ends[(store, p)] = changelog.end_offset()
            changelog.close_reader()
    return ends


def tool(command: Any, *args: str | Path) -> Any:
    return CliRunner().invoke(command, [str(a) for a in args])


def ok_run(config: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    result = run_job(config, "--exit-at-end", *args, **kw)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def history(broker: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A job that ran once over 3,000 messages (overwrites + tombstones), and its live stores."""
    tmp = tmp_path_factory.mktemp("tools-history")
    name = "tools-history"
    create_topic(broker, f"{name}-in", PARTITIONS)
    model = Model()
    send(broker, f"{name}-in", messages(random.Random(5), 3000, keys=120), model)
    live = tmp / "live"
    config = job_config(tmp, broker, name, live)
    ok_run(config)
    assert_model(config, live, model)
    return {"name": name, "config": config, "live": live, "model": model, "tmp": tmp}


def test_restore_into_an_empty_dir_equals_the_live_store_and_the_job_replays_only_the_tail(
    history, broker, tmp_path
):
    name, config, live, model = history["name"], history["config"], history["live"], history["model"]
    restored = tmp_path / "restored"
    # the installed console script, with Samza's --flag=file:///... form
    script = Path(sys.executable).with_name("state-storage-tool")
    done = subprocess.run(
        [str(script), "restore", f"--config-path=file://{config}", f"--path={restored}"],
        capture_output=True,
        text=True,
        env=job_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "records/s" in done.stderr  # plain progress lines (not a terminal)
    assert "restored " in done.stdout and f"job.logged.store.base.dir={restored}" in done.stdout
    assert digest(config, restored) == digest(config, live)
    assert_model(config, restored, model)
    ends = changelog_ends(broker, name)
    for (store, p), end in ends.items():  # the local checkpoint the job trusts, at the end
        (newest, *_) = LocalCheckpoints(
            restored / store / f"Partition_{p}", f"{name}-{store}-changelog", p
        ).newest_first()
        assert newest.offset == end - 1
    assert tool(state_tool, "verify", "--config-path", config, "--path", restored).exit_code == 0

    # the job goes on elsewhere; then a job started on the restored dir replays only the tail
    more = messages(random.Random(6), 400, keys=120, start=10_000)
    send(broker, f"{name}-in", more, model)
    ok_run(config)
    tail = {k: e - ends[k] for k, e in changelog_ends(broker, name).items()}
    assert all(n > 0 for n in tail.values())
    moved = job_config(tmp_path, broker, name, restored)
    metrics_file = tmp_path / "metrics.json"
    ok_run(moved, "--metrics-file", str(metrics_file))
    snapshot = read_metrics(metrics_file)
    for store in STORES:
        replayed = metric_sum(snapshot, f"store.{store}.", "restored-messages")
        assert replayed == sum(n for (s, _), n in tail.items() if s == store)
    assert_model(config, restored, model)

    # restoring again into the same dir is incremental: nothing new to read
    again = tool(state_tool, "restore", "--config-path", config, "--path", restored, "--no-progress")
    assert again.exit_code == 0, again.output
    assert "restored 0 records" in again.stdout


def test_restore_to_checkpoint_equals_the_jobs_own_transactional_restore(broker, tmp_path):
    name = "tools-tocheckpoint"
    create_topic(broker, f"{name}-in", PARTITIONS)
    committed, everything = Model(), Model()
    first = messages(random.Random(7), 1500, keys=80)
    send(broker, f"{name}-in", first, committed)
    for key, message in first:
        everything.apply(key, message)
    live = tmp_path / "live"
    config = job_config(tmp_path, broker, name, live)
    ok_run(config)
    # a run that crashes after its changelog writes are acknowledged, before its checkpoint
    send(broker, f"{name}-in", messages(random.Random(8), 700, keys=80, start=5000), everything)
    crashed = run_job(
        job_config(tmp_path, broker, name, live, **{"task.commit.ms": "600000"}),
        "--exit-at-end",
        env=job_env(SAMZAPY_CRASH_AT="after-producer-flush"),
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]

    at_end = tool(state_tool, "restore", "--config-path", config, "--path", tmp_path / "end", "--no-progress")
    assert at_end.exit_code == 0, at_end.output
    assert_model(config, tmp_path / "end", everything)  # the uncommitted tail included

    at_checkpoint = tool(
        state_tool, "restore", "--config-path", config, "--path", tmp_path / "ckpt", "--to-checkpoint"
    )
    assert at_checkpoint.exit_code == 0, at_checkpoint.output
    assert "trimmed" in at_checkpoint.stdout
    assert_model(config, tmp_path / "ckpt", committed)

    # the job's own restore, in a job process that restores and stops at once
    frozen = job_config(tmp_path, broker, name, live, **{"app.freeze": "true"})
    ok_run(frozen)
    assert digest(config, live) == digest(config, tmp_path / "ckpt")
    assert tool(state_tool, "verify", "--config-path", config, "--path", tmp_path / "ckpt").exit_code == 0


def test_verify_reports_changed_missing_and_extra_keys_in_a_tampered_copy(history, tmp_path):
    config, model = history["config"], history["model"]
    restored = tmp_path / "restored"
    assert tool(state_tool, "restore", "--config-path", config, "--path", restored).exit_code == 0
    good = tool(state_tool, "verify", "--config-path", config, "--path", restored)
    assert good.exit_code == 0 and "identical to their changelogs" in good.stdout
    (changed, removed) = sorted(k for k in contents(config, restored, "kv"))[:2]
    store = RocksDBStore(_partition_of(config, restored, changed))
    store.put(changed.encode(), orjson.dumps({"seq": -1}))
    store.close()
    store = RocksDBStore(_partition_of(config, restored, removed))
    store.delete(removed.encode())
    store.put(b"zz-extra", orjson.dumps({"seq": -2}))
    store.close()

    bad = tool(state_tool, "verify", "--config-path", config, "--path", restored, "--store", "kv")
    assert bad.exit_code == 1, bad.output
    out = bad.stdout
    assert (
        f'different "{changed}": store {{"seq":-1}}, changelog {orjson.dumps(model.kv[changed]).decode()}'
        in out
    )
    assert f'missing   "{removed}": store absent' in out
    assert 'extra     "zz-extra": store {"seq":-2}, changelog absent' in out
    as_json = tool(state_tool, "verify", "--config-path", config, "--path", restored, "--format", "json")
    rows = [orjson.loads(line) for line in as_json.stdout.splitlines()]
    assert as_json.exit_code == 1
    assert sum(r["missing"] + r["extra"] + r["different"] for r in rows) == 3
    assert all(r["ok"] for r in rows if r["store"] == "counts")  # the untouched store passes


def _partition_of(config: Path, base: Path, key: str) -> Path:
    with RocksDbKeyValueReader("kv", base, config) as reader:
        partition, _ = reader.find(key)
    return base / "kv" / f"Partition_{partition}"


def test_inspect_reads_a_live_store_while_the_job_writes_and_the_job_is_unharmed(broker, tmp_path):
    name = "tools-live"
    create_topic(broker, f"{name}-in", PARTITIONS)
    model = Model()
    send(broker, f"{name}-in", messages(random.Random(9), 300, keys=30), model)
    live = tmp_path / "live"
    config = job_config(tmp_path, broker, name, live, **{"stores.counts.object.cache.size": "0"})
    job = start_job(config, log=tmp_path / "job.log")
    try:

        def inspect(*keys: str) -> dict[str, Any] | None:
            args = [
                "inspect",
                "--config-path",
                config,
                "--db-path",
                live,
                "--db-name",
                "kv",
                "--format",
                "json",
            ]
            result = tool(read_tool, *args, "--string-key", ",".join(keys))
            if result.exit_code == 2 and (
                "RocksDB store" in result.stderr or "not a directory" in result.stderr
            ):
                return None  # the job has not created its stores yet
            assert result.exit_code == 0, result.output
            return {row["key"]: row["value"] for row in map(orjson.loads, result.stdout.splitlines())}

        def sees_model() -> bool:
            keys = sorted(model.counts)
            return inspect(*keys) == {k: model.kv.get(k) for k in keys}

        # the job resets its stores while it restores them at start: read once it processes
        log = tmp_path / "job.log"
        wait_for(
            lambda: "starts at offset" in log.read_text(errors="replace"), what="the job to start processing"
        )
        wait_for(sees_model, what="the first batch in the live store")
        # values written after the job started, seen while it runs (memtable included)
        batch = [(f"live-{i}", {"seq": 100_000 + i}) for i in range(20)]
        send(broker, f"{name}-in", batch, model)
        wait_for(lambda: inspect(*(k for k, _ in batch)) == dict(batch), timeout=30, what="live values")
        stats = tool(read_tool, "stats", "--config-path", config, "--db-path", live, "--db-name", "kv", "-q")
        assert "in use by a job   yes" in stats.stdout
        refused = tool(
            state_tool, "restore", "--config-path", config, "--path", tmp_path / "x", "--to-checkpoint"
        )
        assert refused.exit_code == 1 and "the job looks alive" in refused.output
        send(broker, f"{name}-in", messages(random.Random(10), 300, keys=30, start=1000), model)
        wait_for(sees_model, timeout=30, what="the second batch in the live store")
        assert job.poll() is None  # all of this while the job kept running
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(timeout=60)
    assert code == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert_model(config, live, model)  # exact: nothing lost, nothing counted twice


def test_bad_input_against_the_broker_exits_2_with_its_message(history, tmp_path):
    config = history["config"]
    cases = [
        (
            ["--partition", "7"],
            "--partition 7 is out of range: changelog 'tools-history-kv-changelog' has 2 partitions",
        ),
        (["--store", "nope"], "store 'nope' is not in the config"),
        (["--engine", "spark"], "not available yet: the Spark engine arrives with the Spark issue"),
    ]
    for extra, message in cases:
        if "spark" in extra and _spark_available():
            continue
        result = tool(state_tool, "restore", "--config-path", config, "--path", tmp_path / "r", *extra)
        assert result.exit_code == 2, result.output
        assert message in result.stderr and result.stderr.count("\n") == 1
    result = tool(state_tool, "verify", "--config-path", config, "--path", tmp_path / "empty")
    assert result.exit_code == 2 and "no store of" in result.stderr


def _spark_available() -> bool:
    try:
        from samzapy.spark.restore import bulk  # noqa: F401
    except ImportError:
        return False
    return True

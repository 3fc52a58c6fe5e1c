"""Side-input stores on the real dev broker, jobs in subprocesses: the global table of
``config/pageview-enrich-global.properties`` is read whole before the first view, follows
updates while the job runs, and survives kill -9 (docs/side-inputs.md)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support, next to this file

from jobs_support import dedup_by_id, job_config, outputs, run_to_end  # noqa: E402
from support import (  # noqa: E402
    create_topic,
    job_env,
    kill9,
    produce,
    read_metrics,
    run_job,
    start_job,
    wait_for,
)

from samzapy.config import load_config, parse_job_config  # noqa: E402
from samzapy.container.side_inputs import SideInputs  # noqa: E402
from samzapy.generate import produce_json  # noqa: E402
from samzapy.metrics import MetricsRegistry  # noqa: E402
from samzapy.serdes import SerdeResolver  # noqa: E402
from samzapy.stores.side_input_store import SideInputRocksDBStore  # noqa: E402

pytestmark = pytest.mark.integration

USERS = [f"u{i:02d}" for i in range(20)]
DELETED = USERS[15:]  # profile tombstoned before the job starts
STORE_GROUP = "store.user-zips.Global_0"  # the container's one global store


def profile(user: str, zip_code: str) -> tuple[bytes, dict]:
    return user.encode(), {"user_id": user, "zip": zip_code}


def tombstone(user: str) -> tuple[bytes, None]:
    return user.encode(), None


# Before the job starts: three versions of every profile (a view enriched before the table
# was read to its end would carry no zip or an early one), then tombstones for DELETED.
TABLE_AT_START = [profile(u, f"early-{u}-{v}") for v in (1, 2) for u in USERS]
TABLE_AT_START += [profile(u, f"zip-{u}-A") for u in USERS] + [tombstone(u) for u in DELETED]
# While the job runs: new zips for u00-u04 and u15 back.
UPDATE_RUNNING = [profile(u, f"zip-{u}-B") for u in (*USERS[:5], "u15")]
# While the job is down after kill -9: users without views in batch B (which may be processed
# again after the restart, and must then be enriched as the first time).
UPDATE_DOWN = [profile(u, f"zip-{u}-C") for u in (*USERS[10:15], "u19")]


def views(batch: str, users: list[str], per_user: int) -> list[tuple[bytes, dict]]:
    return [
        (u.encode(), {"view_id": f"{batch}-{u}-{n}", "user_id": u, "page": f"/p/{n}"})
        for n in range(per_user)
        for u in users
    ]


VIEWS_A = views("A", USERS, 3)  # before the start
VIEWS_B = views("B", [*USERS[:10], "u15"], 3)  # after UPDATE_RUNNING is applied
VIEWS_C = views("C", USERS, 3)  # while the job is down


def zips_after(*updates: list) -> dict[str, str]:
    table: dict[str, str | None] = {}
    for update in updates:
        for key, value in update:
            table[key.decode()] = None if value is None else value["zip"]
    return {u: z for u, z in table.items() if z is not None}


def expected() -> dict[str, dict]:
    want = {}
    for batch, table in (
        (VIEWS_A, zips_after(TABLE_AT_START)),
        (VIEWS_B, zips_after(TABLE_AT_START, UPDATE_RUNNING)),
        (VIEWS_C, zips_after(TABLE_AT_START, UPDATE_RUNNING, UPDATE_DOWN)),
    ):
        for _, view in batch:
            if view["user_id"] in table:  # inner join: views of users without a zip are dropped
                want[view["view_id"]] = {**view, "zip": table[view["user_id"]]}
    return want


def enriched(broker: str, topic: str) -> dict[str, dict]:
    unique = dedup_by_id(outputs(broker, topic))
    return {orjson.loads(r.value)["view_id"]: orjson.loads(r.value) for r in unique.values()}


def store_metric(path: Path, name: str) -> int:
    if not path.exists():
        return -1
    return int(read_metrics(path).get(STORE_GROUP, {}).get(name, -1))


@pytest.mark.crash
def test_global_table_is_read_first_follows_updates_and_survives_kill9(tmp_path: Path, broker: str) -> None:
    tag = "side-global"
    topics = {name: f"{name}-{tag}" for name in ("profiles", "views", "enriched")}
    create_topic(broker, topics["views"], 2)
    produce_json(broker, topics["profiles"], 3, TABLE_AT_START)  # 3 partitions, 2 tasks: global
    produce_json(broker, topics["views"], 2, VIEWS_A)
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich-global.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['views']}",
            "stores.user-zips.side.inputs": f"kafka.{topics['profiles']}",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )
    want = expected()
    want_a = {k: v for k, v in want.items() if k.startswith("A-")}
    want_b = {k: v for k, v in want.items() if k.startswith("B-")}
    metrics = tmp_path / "metrics-1.json"
    job = start_job(config, "--metrics-file", str(metrics), log=tmp_path / "job.log")
    try:
        wait_for(lambda: len(enriched(broker, topics["enriched"])) >= len(want_a), what="batch A enriched")
        assert enriched(broker, topics["enriched"]) == want_a
        # Outputs can be visible before the commit that writes the metrics file ends.
        wait_for(metrics.exists, what="the first metrics write")
        assert store_metric(metrics, "restored-records") == len(TABLE_AT_START)

        produce_json(broker, topics["profiles"], 3, UPDATE_RUNNING)
        wait_for(lambda: store_metric(metrics, "updates") == len(UPDATE_RUNNING), what="the update applied")
        produce_json(broker, topics["views"], 2, VIEWS_B)
        wait_for(
            lambda: len(enriched(broker, topics["enriched"])) >= len(want_a) + len(want_b),
            what="batch B enriched",
        )
    finally:
        kill9(job)
    assert enriched(broker, topics["enriched"]) == want_a | want_b

    produce_json(broker, topics["profiles"], 3, UPDATE_DOWN)
    produce_json(broker, topics["views"], 2, VIEWS_C)
    restart_metrics = tmp_path / "metrics-2.json"
    run_to_end(config, restart_metrics)

    assert enriched(broker, topics["enriched"]) == want
    # The offsets stored with the data survived kill -9: the restart read only the tail.
    assert store_metric(restart_metrics, "restored-records") == len(UPDATE_DOWN)

    # Without its state directory the store is rebuilt from the whole topic.
    shutil.rmtree(tmp_path / "state-pageview-enrich-global-side-global")
    rebuild_metrics = tmp_path / "metrics-3.json"
    run_to_end(config, rebuild_metrics)
    total = len(TABLE_AT_START) + len(UPDATE_RUNNING) + len(UPDATE_DOWN)
    assert store_metric(rebuild_metrics, "restored-records") == total
    assert enriched(broker, topics["enriched"]) == want


def test_partition_scope_stores_bytes_as_they_are_in_each_tasks_own_store(
    tmp_path: Path, broker: str
) -> None:
    tag = "side-partition"
    topics = {name: f"{name}-{tag}" for name in ("zips", "views", "enriched")}
    create_topic(broker, topics["zips"], 2)
    table = [(u.encode(), f"zip-{u}".encode()) for u in USERS[:12]] + [(b"u03", None), (b"u04", b"moved")]
    produce(broker, topics["zips"], table)  # co-partitioned with the views: both by key
    produce_json(broker, topics["views"], 2, VIEWS_A)
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich-global.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['views']}",
            "stores.user-zips.side.inputs": f"kafka.{topics['zips']}",
            "stores.user-zips.side.inputs.scope": "partition",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )
    # No processor: the topic's key and value bytes go into the store as they are.
    config.write_text(
        "".join(line + "\n" for line in config.read_text().splitlines() if "processor.factory" not in line)
    )
    metrics = tmp_path / "metrics.json"
    run_to_end(config, metrics)

    zips = {u: f"zip-{u}" for u in USERS[:12] if u != "u03"} | {"u04": "moved"}
    want = {v["view_id"]: {**v, "zip": zips[v["user_id"]]} for _, v in VIEWS_A if v["user_id"] in zips}
    assert enriched(broker, topics["enriched"]) == want
    snapshot = read_metrics(metrics)
    per_task = [int(snapshot[f"store.user-zips.Partition {p}"]["restored-records"]) for p in (0, 1)]
    assert sum(per_task) == len(table) and all(n > 0 for n in per_task)


@pytest.mark.parametrize(
    ("stale_offsets", "rebuilt"),
    [
        ({}, False),  # offsets as written by the last run: trusted, only the tail is read
        ({"beyond": 1000}, True),  # beyond the end: the topic was recreated
        ({"unknown": 3}, True),  # a partition the configuration no longer names
    ],
    ids=["trusted", "beyond-end", "unknown-partition"],
)
def test_stored_offsets_are_trusted_only_when_they_fit_the_topic(
    tmp_path: Path, broker: str, stale_offsets: dict[str, int], rebuilt: bool
) -> None:
    topic = f"zips-offsets-{'-'.join(stale_offsets) or 'trusted'}"
    create_topic(broker, topic, 1)
    produce(broker, topic, [(f"u{i}".encode(), f"zip-{i}".encode()) for i in range(5)])
    file = tmp_path / "job.properties"
    file.write_text(
        "job.name=offsets\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.views\n"
        f"job.logged.store.base.dir={tmp_path / 'state'}\nstores.z.factory=rocksdb\n"
        f"stores.z.side.inputs=kafka.{topic}\nstores.z.side.inputs.scope=global\n"
    )
    config = load_config(file)
    job = parse_job_config(config)

    def catch_up() -> tuple[int, list]:
        side = SideInputs.build(job, [0], broker, SerdeResolver(job), MetricsRegistry())
        try:
            side.catch_up()
            with side.store("z", 0).all() as entries:
                return side.targets[0].metrics.counter("restored-records").value, list(entries)
        finally:
            side.close()

    assert catch_up()[0] == 5
    engine = SideInputRocksDBStore(tmp_path / "state" / "z" / "Global_0")
    offsets = {(topic if name == "beyond" else "gone", 0): offset for name, offset in stale_offsets.items()}
    engine.apply([(b"stale", b"x")], offsets)
    engine.close()

    restored, entries = catch_up()

    table = [(f"u{i}".encode(), f"zip-{i}".encode()) for i in range(5)]
    assert (restored, entries) == ((5, table) if rebuilt else (0, [(b"stale", b"x"), *table]))


@pytest.mark.crash
def test_kill9_in_the_middle_of_the_start_up_read_resumes_where_the_store_stopped(
    tmp_path: Path, broker: str
) -> None:
    tag = "side-crash-restore"
    topics = {name: f"{name}-{tag}" for name in ("profiles", "views", "enriched")}
    table = [profile(f"u{i:02d}", f"zip-{i}-{v}") for v in range(3) for i in range(100)]
    produce_json(broker, topics["profiles"], 3, table)  # 3 partitions: at least 3 batches
    page_views = [(f"u{n:02d}".encode(), {"view_id": f"v{n}", "user_id": f"u{n:02d}"}) for n in range(100)]
    produce_json(broker, topics["views"], 2, page_views)
    config = job_config(
        tmp_path,
        broker,
        "pageview-enrich-global.properties",
        tag,
        {
            "task.inputs": f"kafka.{topics['views']}",
            "stores.user-zips.side.inputs": f"kafka.{topics['profiles']}",
            "join.output.stream": f"kafka.{topics['enriched']}",
        },
    )

    crashed = run_job(config, env=job_env(SAMZAPY_CRASH_AT="during-side-input-restore:2"))
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    store_path = tmp_path / f"state-pageview-enrich-global-{tag}" / "user-zips" / "Global_0"
    engine = SideInputRocksDBStore(store_path)
    applied = sum(engine.offsets().values())  # offsets start at 0: the next offset is the count
    engine.close()
    assert 0 < applied < len(table)
    assert outputs(broker, topics["enriched"]) == []  # nothing processed before the table is whole

    metrics = tmp_path / "metrics.json"
    run_to_end(config, metrics)

    assert store_metric(metrics, "restored-records") == len(table) - applied
    want = {f"v{n}": {"view_id": f"v{n}", "user_id": f"u{n:02d}", "zip": f"zip-{n}-2"} for n in range(100)}
    assert enriched(broker, topics["enriched"]) == want

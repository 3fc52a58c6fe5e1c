"""The query service over real stores (RocksDB in tmp_path and in-memory), without a broker:
locating keys, committed-or-newer reads, ranges, restoring tasks and stale reads, the HTTP
server, the Prometheus port shared, and StateClient."""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from samzapy.config.model import JobConfig, ReporterSpec, StoreConfig
from samzapy.container.standby_store import standby_dir
from samzapy.health import ContainerStatus
from samzapy.kafka.partitioner import partition_for_key
from samzapy.metrics import MetricsGroup, MetricsRegistry
from samzapy.query import LocalCheckpointSource, QueryService, StateClient, StateQueryError
from samzapy.query.formats import QueryError, check_format, key_bytes
from samzapy.query.http import QueryHttpServer, add_query_route
from samzapy.reporters.periodic import ReportSource
from samzapy.reporters.prometheus import MetricsHttpServer
from samzapy.serdes import IntegerSerde, JsonSerde, LongSerde, StringSerde
from samzapy.store_codec import StoreCodec
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.factory import build_store, store_dir
from samzapy.stores.rocksdb import RocksDBStore
from samzapy.streams import SystemStream, task_name_for
from samzapy.testing import InMemoryChangelog

TASKS = 4


def job_config(base: Path, engine: str = "rocksdb", cache: int = 100) -> JobConfig:
    counts = StoreConfig(
        "counts",
        engine=engine,
        key_serde="string",
        msg_serde="long",
        changelog=SystemStream("kafka", "counts-changelog"),
        object_cache_size=cache,
        write_batch_size=min(cache, 50) or 1,
    )
    return JobConfig(job_name="q", logged_store_base_dir=base, stores={"counts": counts})


@pytest.fixture(params=["rocksdb", "inmemory"])
def setup(request, tmp_path: Path):
    job = job_config(tmp_path / "state", engine=request.param)
    tasks = []
    for partition in range(TASKS):
        store = build_store(
            job.stores["counts"],
            partition=partition,
            base_dir=job.logged_store_base_dir,
            key_serde=StringSerde(),
            msg_serde=LongSerde(),
            changelog=InMemoryChangelog(),
            metrics=MetricsGroup(f"store.counts.{task_name_for(partition)}"),
        )
        tasks.append(SimpleNamespace(partition=partition, stores={"counts": store}))
    status = ContainerStatus()
    status.restoring(task_name_for(p) for p in range(TASKS))
    status.running()
    service = QueryService(
        job, 0, TASKS, lambda: tasks, status, registry=MetricsRegistry(), stale=LocalCheckpointSource(job)
    )
    yield SimpleNamespace(job=job, tasks=tasks, status=status, service=service)
    service.close()
    for task in tasks:
        task.stores["counts"].close()


def put(setup, partition: int, key: str, value: int) -> None:
    store = setup.tasks[partition].stores["counts"]
    store.put(key, value)
    store.flush()


def owner(key: str) -> int:
    return partition_for_key(key.encode(), TASKS)


def test_a_key_is_answered_by_its_owner_task(setup) -> None:
    put(setup, owner("ann"), "ann", 7)

    answer = setup.service.handle("/stores/counts/keys/ann")

    assert answer.status == 200
    assert answer.body["value"] == 7 and answer.body["key"] == "ann"
    assert answer.body["task"] == task_name_for(owner("ann"))
    assert answer.body["stale"] is False and answer.body["consistency"] == "committed-or-newer"


def test_reads_see_what_the_cache_wrote_down_not_what_it_still_holds(setup) -> None:
    store = setup.tasks[owner("bob")].stores["counts"]
    store.put("bob", 1)  # dirty in the object cache only
    assert setup.service.handle("/stores/counts/keys/bob").status == 404
    store.flush()  # what every commit does first
    assert setup.service.handle("/stores/counts/keys/bob").body["value"] == 1


def test_a_key_outside_its_owner_task_is_found_by_searching_the_others(setup) -> None:
    elsewhere = (owner("carl") + 1) % TASKS
    put(setup, elsewhere, "carl", 3)

    answer = setup.service.handle("/stores/counts/keys/carl")

    assert answer.status == 200 and answer.body["task"] == task_name_for(elsewhere)
    assert setup.service.handle(f"/stores/counts/keys/carl?partition={owner('carl')}").status == 404


def test_an_absent_key_is_404_and_bad_requests_say_what_is_wrong(setup) -> None:
    assert setup.service.handle("/stores/counts/keys/nobody").status == 404
    unknown = setup.service.handle("/stores/nope/keys/a")
    assert unknown.status == 404 and "stores: counts" in unknown.body["error"]
    assert setup.service.handle("/stores/counts/keys/a?format=xml").status == 400
    assert setup.service.handle("/stores/counts/keys/zz?format=hex").status == 400
    assert setup.service.handle("/stores/counts/range?limit=0").status == 400
    assert setup.service.handle(f"/stores/counts/keys/a?partition={TASKS}").status == 400


def test_hex_keys_and_values(setup) -> None:
    put(setup, owner("dan"), "dan", 258)

    answer = setup.service.handle(f"/stores/counts/keys/{b'dan'.hex()}?format=hex")

    assert answer.status == 200
    assert answer.body["value"] == (258).to_bytes(8, "big").hex() and answer.body["key"] == b"dan".hex()


def test_a_range_merges_every_task_in_key_order(setup) -> None:
    names = [f"user-{i:02d}" for i in range(20)]
    for i, name in enumerate(names):
        put(setup, owner(name), name, i)

    answer = setup.service.handle("/stores/counts/range?from=user-05&to=user-15&limit=100")
    limited = setup.service.handle("/stores/counts/range?from=user-05&limit=3")

    assert answer.status == 200 and answer.body["truncated"] is False
    expected = [(name, i) for i, name in enumerate(names)][5:15]
    assert [(e["key"], e["value"]) for e in answer.body["entries"]] == expected
    assert all(e["task"] == task_name_for(owner(e["key"])) for e in answer.body["entries"])
    assert [e["key"] for e in limited.body["entries"]] == names[5:8] and limited.body["truncated"] is True


def test_a_restoring_task_answers_503_unless_stale_reads_are_asked_for(setup) -> None:
    partition = owner("eve")
    put(setup, partition, "eve", 5)
    raw = setup.tasks[partition].stores["counts"].raw
    if hasattr(raw, "checkpoint_to"):  # RocksDB: a local checkpoint taken at a commit
        topic = setup.job.stores["counts"].changelog.stream
        live = store_dir(setup.job.logged_store_base_dir, "counts", partition)
        LocalCheckpoints(live, topic, partition).create(raw, 41)
    put(setup, partition, "eve", 6)  # newer than the checkpoint
    setup.status.restoring(task_name_for(p) for p in range(TASKS))

    refused = setup.service.handle("/stores/counts/keys/eve")
    stale = setup.service.handle("/stores/counts/keys/eve?allow_stale=true")

    assert refused.status == 503 and refused.body["reason"] == "restoring"
    assert "restoring" in refused.body["blocked"][task_name_for(partition)]
    if hasattr(raw, "checkpoint_to"):
        assert stale.status == 200
        assert stale.body["value"] == 5 and stale.body["stale"] is True
        assert stale.body["source"] == "checkpoint 41"
    else:  # in-memory stores have nothing on disk
        assert stale.status == 503 and "no stale copy" in stale.body["error"]
    assert setup.service.handle("/stores/counts/range").status == 503


def test_a_closed_service_answers_503(setup) -> None:
    setup.service.close()
    answer = setup.service.handle("/stores/counts/keys/ann")
    assert answer.status == 503 and "stopping" in answer.body["error"]


def test_partitions_lists_the_tasks_and_their_status(setup) -> None:
    answer = setup.service.handle("/stores/counts/partitions")

    assert answer.status == 200
    assert [t["task"] for t in answer.body["tasks"]] == [task_name_for(p) for p in range(TASKS)]
    assert {t["status"] for t in answer.body["tasks"]} == {"running"}
    assert all(t["changelog"] == "kafka.counts-changelog" for t in answer.body["tasks"])


def test_key_codec_formats() -> None:
    assert key_bytes(StoreCodec("s", IntegerSerde(), None), "-2", "string") == IntegerSerde().to_bytes(-2)
    assert key_bytes(StoreCodec("s", JsonSerde(), None), '["u", 1]', "json") == JsonSerde().to_bytes(["u", 1])
    assert key_bytes(StoreCodec("s", JsonSerde(), None), "u", "string") == b'"u"'
    assert key_bytes(StoreCodec("s", None, None), "raw", "string") == b"raw"
    with pytest.raises(QueryError, match="not an integer"):
        key_bytes(StoreCodec("s", LongSerde(), None), "x", "string")
    with pytest.raises(QueryError, match="use one of string, json, hex"):
        check_format("yaml")


def test_http_server_and_state_client(setup) -> None:
    put(setup, owner("fay"), "fay", 9)
    put(setup, owner("gus"), "gus", 10)
    server = QueryHttpServer(setup.service, "127.0.0.1", 0)
    server.start()
    try:
        client = StateClient(f"http://127.0.0.1:{server.port}")
        assert client.get("counts", "fay") == 9
        assert client.get("counts", "nobody") is None
        assert client.range("counts", "fay", "gut") == [("fay", 9), ("gus", 10)]
        setup.status.restoring(task_name_for(p) for p in range(TASKS))
        with pytest.raises(StateQueryError) as info:
            client.get("counts", "fay")
        assert info.value.status == 503 and info.value.body["reason"] == "restoring"
    finally:
        server.stop()


def test_the_prometheus_server_serves_queries_on_its_port(setup) -> None:
    put(setup, owner("hal"), "hal", 11)
    spec = ReporterSpec("prom", "prometheus", host="127.0.0.1", port=0)
    metrics = MetricsHttpServer(spec, MetricsRegistry(), setup.status, ReportSource("q", "1", "c0", 0))
    add_query_route(metrics.http, setup.service)
    metrics.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/stores/counts/keys/hal") as response:
            assert json.loads(response.read())["value"] == 11
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/health") as response:
            assert response.status == 200
    finally:
        metrics.stop()


def test_a_standby_copy_answers_stale_reads_when_the_owner_container_cannot(tmp_path: Path) -> None:
    job = dataclasses.replace(job_config(tmp_path / "state"), container_count=2)
    key = next(k for k in (f"k{i}" for i in range(100)) if owner(k) % 2 == 1)  # a task of container 1
    standby = RocksDBStore(standby_dir(job.logged_store_base_dir, "counts", owner(key)))
    standby.put(key.encode(), LongSerde().to_bytes(12))
    LocalCheckpoints(standby.path, "counts-changelog", owner(key)).create(standby, 7)
    standby.close()
    status = ContainerStatus()
    service = QueryService(job, 0, TASKS, list, status, stale=LocalCheckpointSource(job))

    refused = service.handle(f"/stores/counts/keys/{key}")
    stale = service.handle(f"/stores/counts/keys/{key}?allow_stale=true")

    assert refused.status == 503 and "container 1" in refused.body["blocked"]
    assert stale.status == 200 and stale.body["value"] == 12
    assert stale.body["stale"] is True and stale.body["source"] == "standby checkpoint 7"


def test_error_answers_do_not_echo_a_60_kb_key_and_bad_ranges_are_400(setup) -> None:
    server = QueryHttpServer(setup.service, "127.0.0.1", 0)
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        for url in (f"{base}/stores/counts/keys/{'k' * 60_000}", f"{base}/stores/{'s' * 60_000}/range"):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(url)
            body = info.value.read()
            assert info.value.code == 404 and len(body) < 600, body[:200]
            assert b"more characters)" in body
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{base}/stores/counts/range?limit=100000000")
        assert info.value.code == 400 and b"limit=100000000 must be an integer from 1 to" in info.value.read()
    finally:
        server.stop()

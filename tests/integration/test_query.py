"""Interactive queries of running jobs (issue 9 part 1): keys and ranges while the job
processes, a key owned by another container answered through it, and a restoring task that
answers 503 (or, asked for, stale data from its last local checkpoint).

Real dev broker, RocksDB stores, job subprocesses.
"""

from __future__ import annotations

import json
import random
import signal
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from rocksdict import Options, Rdict
from support import create_topic, kill9, produce, read_counts, run_job, start_job, wait_for, write_config

from samzapy.checkpoint import read_checkpoints
from samzapy.kafka.broker import free_port
from samzapy.kafka.partitioner import partition_for_key
from samzapy.kafka.producer import Producer
from samzapy.query import StateClient, StateQueryError
from samzapy.query.directory import Directory, announce, directory_topic

pytestmark = pytest.mark.integration

KEYS = 60


def properties(state: Path, broker: str, name: str, partitions_port: int, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "task.class": "stateful_tasks:CountingTask",
        "task.inputs": f"kafka.{name}-in",
        "task.commit.ms": "200",
        "systems.kafka.consumer.bootstrap.servers": broker,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        "stores.counts.factory": "rocksdb",
        "stores.counts.changelog": f"kafka.{name}-counts-changelog",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "job.logged.store.base.dir": str(state),
        "job.query.port": str(partitions_port),
        "job.query.host": "127.0.0.1",
        **extra,
    }


def produce_keyed(broker: str, topic: str, partitions: int, count: int, seed: int) -> Counter:
    rng = random.Random(seed)
    create_topic(broker, topic, partitions)
    keyed = [f"key-{rng.randrange(KEYS):02d}" for _ in range(count)]
    produce(broker, topic, ((k.encode(), b"m") for k in keyed))
    return Counter(keyed)


def everything(client: StateClient) -> dict[str, int]:
    return dict(client.range("counts", limit=1000))


def stop(process) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0


def test_keys_and_ranges_of_a_running_job_match_its_store(tmp_path: Path, broker: str) -> None:
    name = "query-one"
    state = tmp_path / "state"
    port = free_port()
    expected = produce_keyed(broker, f"{name}-in", 4, 3000, seed=1)
    shared = {  # the Prometheus reporter on the same port: one server answers both
        "metrics.reporters": "prom",
        "metrics.reporter.prom.class": "prometheus",
        "metrics.reporter.prom.host": "127.0.0.1",
        "metrics.reporter.prom.port": str(port),
    }
    config = write_config(tmp_path / "job.properties", properties(state, broker, name, port, **shared))
    client = StateClient(f"http://127.0.0.1:{port}")
    job = start_job(config, log=tmp_path / "job.log")
    try:
        wait_for(lambda: _answers(client), timeout=90, what="the query server")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health") as health:
            assert json.loads(health.read())["status"] == "running"
        seen: dict[str, int] = {}
        final = expected + produce_keyed(broker, f"{name}-in", 4, 3000, seed=2)  # read while processed

        def caught_up() -> bool:
            answered = everything(client)
            for key, value in answered.items():
                assert value <= final[key], (key, value)  # never more than the input gives
                assert value >= seen.get(key, 0), (key, value)  # never goes back
                seen[key] = value
            return answered == dict(final)

        wait_for(caught_up, timeout=90, every=0.05, what="every input counted")
        assert client.get("counts", "key-07") == final["key-07"]
        assert client.get("counts", "no-such-key") is None
        answer = client.lookup("counts", "key-07")
        assert answer["task"] == f"Partition {partition_for_key(b'key-07', 4)}" and answer["stale"] is False
        window = client.range("counts", "key-10", "key-20")
        assert window == sorted((k, v) for k, v in final.items() if "key-10" <= k < "key-20")
        partitions = client.partitions("counts")
        assert [t["status"] for t in partitions["tasks"]] == ["running"] * 4
        answered = everything(client)
    finally:
        if job.poll() is None:
            stop(job)
    assert read_counts(state, range(4)) == answered == dict(final)


def _answers(client: StateClient) -> bool:
    try:
        return client.partitions("counts")["tasks"][0]["status"] == "running"
    except Exception:  # noqa: BLE001 - not up yet
        return False


def test_a_key_of_another_container_is_answered_through_it(tmp_path: Path, broker: str) -> None:
    name = "query-two"
    expected = produce_keyed(broker, f"{name}-in", 4, 2000, seed=3)
    props = properties(tmp_path / "state", broker, name, 0, **{"job.container.count": "2"})
    config = write_config(tmp_path / "job.properties", props)
    jobs = [start_job(config, "--container-id", str(i), log=tmp_path / f"c{i}.log") for i in (0, 1)]
    try:
        topic = directory_topic(name, "1")
        # A fresh Directory per look: known() reads the topic again only while it knows no
        # container, so one that read the first announcement alone would never see the second.
        wait_for(
            lambda: len(Directory(broker, topic).known()) == 2,
            timeout=90,
            every=1.0,
            what="both announcements",
        )
        urls = Directory(broker, topic).known()
        at_0 = StateClient(urls[0])
        wait_for(lambda: _all_counted(at_0, expected), timeout=90, what="every input counted")
        key = next(k for k in sorted(expected) if partition_for_key(k.encode(), 4) % 2 == 1)

        answer = at_0.lookup("counts", key)

        assert answer["value"] == expected[key]
        assert answer["container"] == 1 and answer["via"] == 0  # asked at 0, answered by 1
        assert everything(at_0) == dict(expected)  # a range covers both containers
        by_bootstrap = StateClient(broker, job=name)
        assert by_bootstrap.get("counts", key) == expected[key]
    finally:
        for job in jobs:
            if job.poll() is None:
                stop(job)


def _all_counted(client: StateClient, expected: Counter) -> bool:
    try:
        return everything(client) == dict(expected)
    except StateQueryError:  # a container still restoring
        return False


def test_a_restoring_task_answers_503_unless_stale_reads_are_asked_for(tmp_path: Path, broker: str) -> None:
    name = "query-restoring"
    state = tmp_path / "state"
    port = free_port()
    first = produce_keyed(broker, f"{name}-in", 2, 1000, seed=5)
    config = write_config(tmp_path / "job.properties", properties(state, broker, name, port))
    result = run_job(config, "--exit-at-end")  # stores and local checkpoints on disk
    assert result.returncode == 0, result.stderr[-3000:]
    second = produce_keyed(broker, f"{name}-in", 2, 1000, seed=6)
    key = next(k for k in sorted(first) if partition_for_key(k.encode(), 2) == 0)
    client = StateClient(f"http://127.0.0.1:{port}")
    # Hold the lock of Partition 0's store: the restarted job waits in its restore (up to 30 s).
    lock = Rdict(str(state / "counts" / "Partition_0"), options=Options(raw_mode=True))
    job = start_job(config, log=tmp_path / "job.log")
    try:
        wait_for(lambda: _status(client, key) == 503, timeout=25, every=0.1, what="a 503 while restoring")
        with pytest.raises(StateQueryError) as refused:
            client.get("counts", key)
        stale = client.lookup("counts", key, allow_stale=True)
        partitions = client.partitions("counts")
    finally:
        lock.close()
    try:
        assert refused.value.status == 503 and refused.value.body["reason"] == "restoring"
        assert "restoring" in refused.value.body["blocked"]["Partition 0"]
        assert stale["value"] == first[key] and stale["stale"] is True
        assert stale["source"].startswith("checkpoint ")
        assert partitions["tasks"][0]["status"] == "restoring"
        final = first + second
        wait_for(lambda: _value(client, key) == final[key], timeout=90, what="the restored, caught-up value")
        fresh = client.lookup("counts", key, allow_stale=True)
        assert fresh["stale"] is False and fresh["source"] == "live"
    finally:
        if job.poll() is None:
            stop(job)
        else:
            kill9(job)


def _status(client: StateClient, key: str) -> int | None:
    try:
        client.get("counts", key)
        return 200
    except StateQueryError as error:
        return error.status
    except Exception:  # noqa: BLE001 - not up yet
        return None


def _value(client: StateClient, key: str) -> int | None:
    try:
        return client.get("counts", key)
    except StateQueryError:
        return None


def test_a_standby_copy_answers_stale_reads_for_a_dead_container(tmp_path: Path, broker: str) -> None:
    name = "query-standby"
    expected = produce_keyed(broker, f"{name}-in", 4, 2000, seed=7)
    configs = [
        write_config(
            tmp_path / f"c{i}.properties",
            properties(
                tmp_path / f"state-{i}",  # each container its own machine
                broker,
                name,
                0,
                **{"job.container.count": "2", "job.standbytasks.replication.factor": "2"},
            ),
        )
        for i in (0, 1)
    ]
    jobs = [start_job(configs[i], "--container-id", str(i), log=tmp_path / f"c{i}.log") for i in (0, 1)]
    try:
        checkpoints = f"__samza_checkpoint_ver_1_for_{name}_1"
        wait_for(lambda: _committed_inputs(broker, checkpoints) == 2000, timeout=90, what="input committed")
        kill9(jobs[1])  # container 1 is gone; container 0 holds standby copies of its tasks
        at_0 = StateClient(Directory(broker, directory_topic(name, "1")).known()[0])
        key = next(k for k in sorted(expected) if partition_for_key(k.encode(), 4) % 2 == 1)

        with pytest.raises(StateQueryError) as refused:
            at_0.get("counts", key)
        wait_for(
            lambda: _stale_value(at_0, key) == expected[key], timeout=60, what="the standby's committed value"
        )
        stale = at_0.lookup("counts", key, allow_stale=True)

        assert refused.value.status == 503 and "not reachable" in refused.value.body["error"]
        assert stale["stale"] is True and stale["source"].startswith("standby checkpoint ")
        assert stale["container"] == 0
    finally:
        for job in jobs:
            if job.poll() is None:
                stop(job)


def _committed_inputs(broker: str, topic: str) -> int:
    return sum(o for c in read_checkpoints(broker, topic).values() for o in c.input_offsets.values())


def _stale_value(client: StateClient, key: str) -> int | None:
    try:
        return client.get("counts", key, allow_stale=True)
    except StateQueryError:
        return None


def test_the_directory_sees_a_container_that_announces_later(broker: str) -> None:
    topic = directory_topic("late-announcer", "1")
    create_topic(broker, topic, 1, compact=True)
    producer = Producer(broker)
    try:
        announce(producer, topic, 0, "http://127.0.0.1:1/", ["Partition 0"])
        directory = Directory(broker, topic)
        assert directory.known() == {0: "http://127.0.0.1:1/"}
        announce(producer, topic, 1, "http://127.0.0.1:2/", ["Partition 1"])
        wait_for(lambda: 1 in directory.known(), timeout=30, what="container 1 in the directory")
        assert directory.known() == {0: "http://127.0.0.1:1/", 1: "http://127.0.0.1:2/"}
    finally:
        producer.close()

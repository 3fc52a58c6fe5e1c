"""Restore and transactional state against the real dev broker and real RocksDB."""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from samzapy.config.model import StoreConfig
from samzapy.errors import KafkaSystemError, RestoreError
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.stores.checkpoints import LocalCheckpoints, checkpoints_dir
from samzapy.stores.engine import StorageEngine
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream

pytestmark = pytest.mark.integration


class TestProducer:
    """The producer contract (send/flush/acked_offset) over kafka-python, for these tests."""

    __test__ = False

    def __init__(self, bootstrap_servers: str) -> None:
        self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5)
        self._acked: dict[tuple[str, int], int] = {}
        self._errors: list[BaseException] = []

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: Any = None,
    ) -> None:
        future = self._producer.send(topic, key=key, value=value, partition=partition, headers=headers)
        future.add_callback(self._on_ack)
        future.add_errback(self._errors.append)

    def _on_ack(self, metadata: Any) -> None:
        tp = (metadata.topic, metadata.partition)
        self._acked[tp] = max(self._acked.get(tp, -1), metadata.offset)

    def flush(self) -> None:
        self._producer.flush()
        if self._errors:
            raise KafkaSystemError(f"{len(self._errors)} sends failed: {self._errors[0]}")

    def acked_offset(self, topic: str, partition: int) -> int | None:
        return self._acked.get((topic, partition))

    def close(self) -> None:
        self._producer.close()


class Str:
    def to_bytes(self, obj: str) -> bytes:
        return obj.encode()

    def from_bytes(self, data: bytes) -> str:
        return data.decode()


@pytest.fixture
def producer(broker: str):
    p = TestProducer(broker)
    yield p
    p.close()


@pytest.fixture
def changelog_topic(broker: str, topic_name: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=broker)
    admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    return topic_name


class Harness:
    """Builds, commits and rebuilds one store partition the way the container does."""

    def __init__(
        self, broker: str, topic: str, producer: TestProducer, base_dir: Path, **options: Any
    ) -> None:
        self.broker, self.topic, self.producer, self.base_dir = broker, topic, producer, base_dir
        # One changelog record per write: the tests count them (restored tail, trimmed records).
        options.setdefault("changelog_coalesce", False)
        self.config = StoreConfig(
            name="s",
            changelog=SystemStream("kafka", topic),
            key_serde="string",
            msg_serde="string",
            **options,
        )
        self.metrics = MetricsGroup("store.s.Partition 1")

    def build(self) -> StorageEngine:
        self.metrics = MetricsGroup("store.s.Partition 1")
        changelog = KafkaChangelog(self.topic, 1, self.producer, self.broker)
        return build_store(
            self.config,
            partition=1,
            base_dir=self.base_dir,
            key_serde=Str(),
            msg_serde=Str(),
            changelog=changelog,
            metrics=self.metrics,
        )

    def commit(self, engine: StorageEngine) -> int | None:
        engine.flush()
        self.producer.flush()
        offset = engine.changelog_offset()
        engine.checkpoint(offset)
        return offset

    def restored(self, k: int | None, **kwargs: Any) -> StorageEngine:
        engine = self.build()
        engine.restore(k, **kwargs)
        return engine

    @property
    def live_dir(self) -> Path:
        return self.base_dir / "s" / "Partition_1"

    def changelog_last_values(self) -> dict[str, str]:
        changelog = KafkaChangelog(self.topic, 1, self.producer, self.broker)
        last: dict[str, str] = {}
        for batch in changelog.read(0):
            for r in batch:
                if r.value is None:
                    last.pop(r.key.decode(), None)
                else:
                    last[r.key.decode()] = r.value.decode()
        changelog.close_reader()
        return last


def items(engine: StorageEngine) -> dict[str, str]:
    with engine.all() as it:
        return dict(it)


def digest(engine: StorageEngine) -> str:
    h = hashlib.sha256()
    with engine.all() as it:
        for k, v in it:
            h.update(repr((k, v)).encode())
    return h.hexdigest()


def random_writes(engine: StorageEngine, n: int, seed: int, keys: int = 2000) -> None:
    rnd = random.Random(seed)
    for i in range(n):
        key = f"k{rnd.randrange(keys):05d}"
        if rnd.random() < 0.2:
            engine.delete(key)
        else:
            engine.put(key, f"v{i}-" + "x" * rnd.randrange(50))


@pytest.fixture
def harness(broker: str, changelog_topic: str, producer: TestProducer, tmp_path: Path) -> Harness:
    return Harness(broker, changelog_topic, producer, tmp_path / "state", object_cache_size=0)


@pytest.mark.parametrize("engine_kind", ["rocksdb", "inmemory"])
@pytest.mark.parametrize("cache", [0, 100])
def test_restore_from_scratch_equals_live_store(
    broker, changelog_topic, producer, tmp_path, engine_kind, cache
):
    h = Harness(
        broker,
        changelog_topic,
        producer,
        tmp_path / "state",
        engine=engine_kind,
        object_cache_size=cache,
        write_batch_size=min(cache, 50) or 1,
    )
    live = h.build()
    live.restore(None)
    random_writes(live, 5000, seed=1)
    k = h.commit(live)
    expected = digest(live)
    live.close()
    shutil.rmtree(h.base_dir, ignore_errors=True)
    restored = h.restored(k)
    assert digest(restored) == expected
    assert h.metrics.snapshot()["restored-messages"] == k + 1
    assert h.metrics.snapshot()["trimmed-messages"] == 0
    assert h.metrics.snapshot()["restored-bytes"] > 0
    assert h.changelog_last_values() == items(restored)
    restored.close()


def test_clean_restart_replays_nothing_and_lost_checkpoint_replays_only_tail(harness: Harness) -> None:
    live = harness.build()
    live.restore(None)
    random_writes(live, 1000, seed=2)
    k1 = harness.commit(live)
    random_writes(live, 700, seed=3)
    k2 = harness.commit(live)
    expected = digest(live)
    live.close()

    again = harness.restored(k2)
    assert digest(again) == expected
    assert harness.metrics.snapshot()["restored-messages"] == 0
    again.close()

    shutil.rmtree(checkpoints_dir(harness.live_dir) / str(k2))
    tail = harness.restored(k2)
    assert digest(tail) == expected
    assert harness.metrics.snapshot()["restored-messages"] == k2 - k1 == 700
    tail.close()


def test_local_checkpoint_ahead_of_checkpointed_offset_is_not_used(harness: Harness) -> None:
    live = harness.build()
    live.restore(None)
    random_writes(live, 500, seed=4)
    k1 = harness.commit(live)
    at_k1 = items(live)
    random_writes(live, 500, seed=5)
    k2 = harness.commit(live)  # local checkpoint at k2 written; the Kafka checkpoint stays at k1 (crash)
    live.close()
    assert (checkpoints_dir(harness.live_dir) / str(k2)).is_dir()

    restored = harness.restored(k1)
    assert items(restored) == at_k1
    assert harness.metrics.snapshot()["restored-messages"] == 0  # from the checkpoint at k1
    assert harness.metrics.snapshot()["trimmed-messages"] == k2 - k1
    assert not (checkpoints_dir(harness.live_dir) / str(k2)).exists()
    harness.producer.flush()
    assert harness.changelog_last_values() == at_k1
    restored.close()


@pytest.mark.parametrize("offset_file", ["missing", "empty", "garbage", "beyond-end"])
def test_untrusted_local_checkpoint_leads_to_full_restore(harness: Harness, offset_file: str) -> None:
    live = harness.build()
    live.restore(None)
    random_writes(live, 800, seed=6)
    k = harness.commit(live)
    expected = digest(live)
    live.close()
    checkpoint = checkpoints_dir(harness.live_dir) / str(k)
    target = checkpoint / "OFFSET"
    if offset_file == "missing":
        target.unlink()
    elif offset_file == "empty":
        target.write_text("")
    elif offset_file == "garbage":
        target.write_bytes(b"\x00\xffnot json")
    else:
        target.write_text(f'{{"topic": "{harness.topic}", "partition": 1, "offset": {10**9}}}')
    restored = harness.restored(k)
    assert digest(restored) == expected
    assert harness.metrics.snapshot()["restored-messages"] == k + 1
    restored.close()


def test_corrupt_live_dir_and_checkpoint_are_rebuilt(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    live = harness.build()
    live.restore(None)
    random_writes(live, 300, seed=7)
    k = harness.commit(live)
    expected = digest(live)
    live.close()
    (harness.live_dir / "CURRENT").write_text("garbage")
    (checkpoints_dir(harness.live_dir) / str(k) / "CURRENT").write_text("garbage")
    restored = harness.restored(k)
    assert digest(restored) == expected
    assert harness.metrics.snapshot()["restored-messages"] == k + 1
    assert "does not open" in caplog.text
    restored.close()


def transactional_writes(engine: StorageEngine, harness: Harness) -> int | None:
    """Samza's TransactionalStateIntegrationTest at store level: 1,2,3,2 committed, then
    97,-97,98,99 (and a change of 2) written and acknowledged but not committed."""
    engine.restore(None)
    for key in ["1", "2", "3", "2"]:
        engine.put(key, key)
    k = harness.commit(engine)
    engine.put("97", "97")
    engine.delete("97")
    engine.put("98", "98")
    engine.put("99", "99")
    engine.put("2", "changed")
    engine.delete("1")
    engine.flush()
    harness.producer.flush()  # acknowledged, but the crash comes before the checkpoint
    return k


@pytest.mark.parametrize("keep_local", [True, False])
def test_uncommitted_writes_are_trimmed(harness: Harness, keep_local: bool) -> None:
    live = harness.build()
    k = transactional_writes(live, harness)
    live.close()
    if not keep_local:
        shutil.rmtree(harness.base_dir)
    restored = harness.restored(k)
    assert items(restored) == {"1": "1", "2": "2", "3": "3"}
    assert harness.metrics.snapshot()["trimmed-messages"] == 6
    harness.producer.flush()
    assert harness.changelog_last_values() == {"1": "1", "2": "2", "3": "3"}
    restored.close()

    # a second restore at the same checkpoint (crash before the next commit) gives the same state
    shutil.rmtree(harness.base_dir)
    again = harness.restored(k)
    assert items(again) == {"1": "1", "2": "2", "3": "3"}
    again.put("4", "4")
    k2 = harness.commit(again)
    again.close()
    assert items(harness.restored(k2)) == {"1": "1", "2": "2", "3": "3", "4": "4"}


def test_no_checkpoint_trims_everything(harness: Harness) -> None:
    live = harness.build()
    live.restore(None)
    random_writes(live, 200, seed=8)
    harness.commit(live)  # local checkpoint, but no Kafka checkpoint was ever written
    live.close()
    restored = harness.restored(None)
    assert items(restored) == {}
    assert harness.metrics.snapshot()["trimmed-messages"] == 200
    harness.producer.flush()
    assert harness.changelog_last_values() == {}
    assert not checkpoints_dir(harness.live_dir).exists()
    restored.close()


def test_checkpointed_offset_beyond_changelog_end_fails(harness: Harness) -> None:
    engine = harness.build()
    with pytest.raises(RestoreError, match="beyond the changelog's end"):
        engine.restore(5)
    engine.close()


def test_untrusted_local_flag_forces_full_restore(harness: Harness) -> None:
    live = harness.build()
    live.restore(None)
    random_writes(live, 300, seed=9)
    k = harness.commit(live)
    live.close()
    restored = harness.restored(k, trusted_local=False)
    assert harness.metrics.snapshot()["restored-messages"] == k + 1
    restored.close()


def test_a_commit_without_a_local_checkpoint_restores_from_the_older_one(
    broker, changelog_topic, producer, tmp_path
):
    # stores.S.local.checkpoint.ms: commits between two local checkpoints take none.
    h = Harness(broker, changelog_topic, producer, tmp_path / "state", object_cache_size=0)
    live = h.build()
    live.restore(None)
    random_writes(live, 300, seed=5)
    first = h.commit(live)
    random_writes(live, 200, seed=6)
    live.flush()
    h.producer.flush()
    second = live.changelog_offset()  # committed, with no local checkpoint
    expected = digest(live)
    checkpoints = [c.offset for c in LocalCheckpoints(h.live_dir, h.topic, 1).newest_first()]
    assert checkpoints == [first]
    assert h.metrics.snapshot()["local-checkpoints"] == 1
    live.close()  # as after a crash: the live directory is never trusted by a restore
    # Restore to the second commit starts from the first checkpoint and replays exactly the
    # records between the two.
    restored = h.restored(second)
    assert digest(restored) == expected
    assert h.metrics.snapshot()["restored-messages"] == second - first
    restored.checkpoint(restored.changelog_offset())
    assert [c.offset for c in LocalCheckpoints(h.live_dir, h.topic, 1).newest_first()] == [second, first]
    restored.close()

"""Crash points inside restore and trim: a SIGKILLed restore leaves nothing a second restore
cannot fix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from samzapy.config.model import StoreConfig
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.metrics import MetricsGroup
from samzapy.stores.factory import build_store
from samzapy.streams import SystemStream

pytestmark = [pytest.mark.integration, pytest.mark.crash]

RESTORE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kafka import KafkaProducer
    from samzapy.config.model import StoreConfig
    from samzapy.metrics import MetricsGroup
    from samzapy.kafka.changelog import KafkaChangelog
    from samzapy.stores.factory import build_store
    from samzapy.streams import SystemStream

    class Producer:
        def __init__(self, servers):
            self.p = KafkaProducer(bootstrap_servers=servers, acks="all")
        def send(self, topic, key, value, *, partition=None, headers=None):
            self.p.send(topic, key=key, value=value, partition=partition)
        def flush(self):
            self.p.flush()
        def acked_offset(self, topic, partition):
            return None

    broker, topic, base, k = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    producer = Producer(broker)
    config = StoreConfig(name="s", changelog=SystemStream("kafka", topic), object_cache_size=0)
    engine = build_store(config, partition=0, base_dir=base, key_serde=None, msg_serde=None,
                         changelog=KafkaChangelog(topic, 0, producer, broker), metrics=MetricsGroup("s"))
    engine.restore(None if k == "none" else int(k))
    producer.flush()
    print("restored", flush=True)
    """
)


def produce(broker: str, topic: str, entries: list[tuple[bytes, bytes | None]]) -> int:
    producer = KafkaProducer(bootstrap_servers=broker, acks="all", linger_ms=20)
    last = None
    for key, value in entries:
        last = producer.send(topic, key=key, value=value, partition=0)
    producer.flush()
    offset = last.get().offset
    producer.close()
    return offset


def run_restore(broker: str, topic: str, base: Path, k: int | None, crash_at: str | None) -> int:
    env = dict(os.environ)
    env.pop("SAMZAPY_CRASH_AT", None)
    if crash_at:
        env["SAMZAPY_CRASH_AT"] = crash_at
    proc = subprocess.run(
        [sys.executable, "-c", RESTORE, broker, topic, str(base), str(k).lower()],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"restore exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.returncode


def restored_items(broker: str, topic: str, base: Path, k: int | None) -> dict[bytes, bytes]:
    config = StoreConfig(name="s", changelog=SystemStream("kafka", topic), object_cache_size=0)
    # the trim writes are dropped: the committed state is what matters, the changelog stays
    changelog = KafkaChangelog.read_only(topic, 0, broker, discard_writes=True)
    engine = build_store(
        config,
        partition=0,
        base_dir=base,
        key_serde=None,
        msg_serde=None,
        changelog=changelog,
        metrics=MetricsGroup("s"),
    )
    try:
        engine.restore(k)
        with engine.all() as it:
            return dict(it)
    finally:
        engine.close()


@pytest.mark.parametrize("crash_at", ["during-restore", "during-trim:2"], ids=["restore", "trim"])
def test_restore_killed_midway_is_repaired_by_the_next_restore(
    broker: str, topic_name: str, tmp_path: Path, crash_at: str
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker)
    admin.create_topics([NewTopic(topic_name, 1, 1)])
    admin.close()
    committed = [(b"c%06d" % i, b"v%d" % i) for i in range(120_000)]
    k = produce(broker, topic_name, committed)
    uncommitted = [(b"c%06d" % i, b"changed") for i in range(0, 120_000, 2)]
    uncommitted += [(b"n%06d" % i, b"new") for i in range(30_000)]
    produce(broker, topic_name, uncommitted)

    assert run_restore(broker, topic_name, tmp_path, k, crash_at) == -signal.SIGKILL
    assert run_restore(broker, topic_name, tmp_path, k, None) == 0
    # a third, in-process restore sees a store that matches the committed state exactly
    assert restored_items(broker, topic_name, tmp_path, k) == dict(committed)

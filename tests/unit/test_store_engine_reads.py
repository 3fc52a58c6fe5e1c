"""The engine's ``get`` calls past pass-through layers, never past a layer that reads for itself."""

from __future__ import annotations

from pathlib import Path

from samzapy.config import Config
from samzapy.config.job import parse_job_config
from samzapy.metrics import MetricsGroup
from samzapy.stores.factory import build_store
from samzapy.testing import InMemoryChangelog


def test_a_get_sees_the_object_cache_and_marks_misses_in_the_logged_layer(tmp_path: Path) -> None:
    config = Config.from_dict(
        {
            "job.name": "j",
            "task.class": "m:T",
            "task.inputs": "kafka.in",
            "stores.s.factory": "rocksdb",
            "stores.s.changelog": "kafka.s-log",
            "stores.s.object.cache.size": "100",
            "stores.s.write.batch.size": "100",
        }
    )
    log = InMemoryChangelog()
    store = build_store(
        parse_job_config(config).stores["s"],
        partition=0,
        base_dir=tmp_path,
        key_serde=None,
        msg_serde=None,
        changelog=log,
        metrics=MetricsGroup("s"),
    )
    store.put(b"held", b"1")  # dirty in the object cache only
    assert store.raw.get(b"held") is None
    assert store.get(b"held") == b"1"  # read from the cache, not from the engine below it
    assert store.get(b"new") is None  # a miss the logged layer notes: the key is absent
    store.put(b"new", b"2")
    store.delete(b"new")  # created and deleted before a commit: no changelog record
    store.flush()
    assert log.records == [(b"held", b"1")]
    assert store.metrics.counter("gets").value == 2
    store.close()

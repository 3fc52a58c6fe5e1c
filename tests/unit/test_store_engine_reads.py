"""The engine's ``get`` calls past pass-through layers, never past a layer that reads for itself."""

from __future__ import annotations

from pathlib import Path

from support import build_one_store, one_store_config

from samzapy.testing import InMemoryChangelog


def test_a_get_sees_the_object_cache_and_marks_misses_in_the_logged_layer(tmp_path: Path) -> None:
    config = one_store_config(object_cache_size="100", write_batch_size="100")
    log = InMemoryChangelog()
    store = build_one_store(config, tmp_path, log)
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

"""``state-storage-tool verify``: compare the stores in a directory with their changelogs.

For every ``<path>/<store>/Partition_<N>``: the offset the store records (its newest local
checkpoint's ``OFFSET`` file) says which changelog prefix it must equal. That prefix is
restored into a scratch directory with the job's own restore (read-only: the end is pinned
just after the recorded offset, so nothing is trimmed), then both stores are walked side by
side in key order. A key only in the changelog is *missing*, only in the store is *extra*,
in both with other bytes is *different*. Memory stays flat: nothing is held but a few
examples per partition.

The store is opened as a secondary instance, so verifying the directory of a running job
works, but a job writes ahead of its last checkpoint between commits: expect differences
there.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samzapy.config import StoreConfig
from samzapy.errors import SamzapyError
from samzapy.metrics import MetricsGroup
from samzapy.ondisk.secondary import DbLocation, SecondaryDb, locate
from samzapy.serdes import SerdeResolver
from samzapy.store_codec import StoreCodec
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.factory import build_store
from samzapy.tools.common import (
    BadInputError,
    JobSetup,
    ToolChangelog,
    ToolError,
    select_stores,
)

#: Differences shown per partition (all are counted).
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class Difference:
    """One key that differs; values decoded with the store's serdes (``None``: absent)."""

    kind: str  # "missing" | "extra" | "different"
    key: Any
    store_value: Any
    changelog_value: Any


@dataclass
class PartitionVerify:
    """The comparison of one store partition with its changelog."""

    store: str
    partition: int
    path: Path
    offset: int | None = None
    keys: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    examples: list[Difference] = field(default_factory=list)
    problem: str | None = None  # why it could not be compared at all

    @property
    def ok(self) -> bool:
        """Identical to the changelog up to the recorded offset."""
        return self.problem is None and not (self.missing or self.extra or self.different)


@dataclass
class VerifyReport:
    """Every partition compared."""

    path: Path
    partitions: list[PartitionVerify] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No partition differs."""
        return all(p.ok for p in self.partitions)


def verify_stores(
    setup: JobSetup,
    path: Path,
    *,
    stores: Sequence[str] = (),
    partitions: Sequence[int] = (),
    max_examples: int = MAX_EXAMPLES,
) -> VerifyReport:
    """Compare the stores under ``path`` with their changelogs (module doc).

    Raises:
        BadInputError: unknown store, a named store or partition not under ``path``, or no
            store of the job there at all.
    """
    chosen = select_stores(setup, stores, logged_only=True)
    servers = setup.bootstrap_servers()
    serdes = SerdeResolver(setup.job)
    report = VerifyReport(path)
    for store in chosen:
        if not (path / store.name).is_dir():
            if stores:
                msg = f"store '{store.name}' is not under '{path}' (no {store.name}/ directory)"
                raise BadInputError(msg)
            continue
        for location in _locations(path, store, partitions):
            report.partitions.append(_verify_one(store, location, servers, serdes, max_examples))
    if not report.partitions:
        msg = f"no store of {setup.source} under '{path}' (expected <store>/Partition_<N> directories)"
        raise BadInputError(msg)
    return report


def _locations(path: Path, store: StoreConfig, partitions: Sequence[int]) -> list[DbLocation]:
    if not partitions:
        return [loc for loc in locate(path, store.name) if loc.partition is not None]
    return [locate(path, store.name, p)[0] for p in sorted(set(partitions))]


def _verify_one(
    store: StoreConfig, location: DbLocation, servers: str, serdes: SerdeResolver, max_examples: int
) -> PartitionVerify:
    assert store.changelog is not None and location.partition is not None
    result = PartitionVerify(store.name, location.partition, location.path)
    topic = store.changelog.stream
    recorded = LocalCheckpoints(location.path, topic, location.partition).newest_first()
    changelog = ToolChangelog(topic, location.partition, None, servers)  # read-only
    end = changelog.pin_end()
    if recorded:
        result.offset = recorded[0].offset
    elif end > 0:
        result.problem = (
            "no recorded changelog offset (no local checkpoint with an OFFSET file): "
            "a job would not trust this store and would restore it from scratch"
        )
        changelog.close_reader()
        return result
    if result.offset is not None and result.offset >= end:
        result.problem = f"recorded offset {result.offset} is beyond the changelog's end ({end})"
        changelog.close_reader()
        return result
    key_serde, msg_serde = serdes.for_store(store)
    codec = StoreCodec(store.name, key_serde, msg_serde, store.key_serde)
    _compare(store, location, changelog, result, codec, max_examples)
    return result


def _compare(
    store: StoreConfig,
    location: DbLocation,
    changelog: ToolChangelog,
    result: PartitionVerify,
    codec: StoreCodec,
    max_examples: int,
) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="samzapy-verify-"))
    if result.offset is not None:
        changelog.pin_end(result.offset + 1)  # restore exactly to the recorded offset, no trim
    try:
        expected = build_store(
            store,
            partition=location.partition or 0,
            base_dir=scratch,
            key_serde=None,
            msg_serde=None,
            changelog=changelog,
            metrics=MetricsGroup(f"verify.{store.name}.{location.partition}"),
        )
        try:
            expected.restore(result.offset)
            with (
                SecondaryDb(location, ttl=store.ttl_ms is not None, store=store.name) as actual,
                expected.raw.all() as reference,
            ):
                entries = ((e.key, e.value) for e in reference)
                for kind, key, mine, theirs in _diff(actual.entries(), entries, result):
                    _note(result, kind, key, mine, theirs, codec, max_examples)
        finally:
            expected.close()
    except BadInputError:
        raise
    except SamzapyError as exc:
        msg = f"verify of store '{store.name}' partition {location.partition} failed: {exc}"
        raise ToolError(msg) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _diff(
    actual: Iterator[tuple[bytes, bytes]], expected: Iterator[tuple[bytes, bytes]], result: PartitionVerify
) -> Iterator[tuple[str, bytes, bytes | None, bytes | None]]:
    """Walk two key-ordered streams together: (kind, key, store value, changelog value)."""
    a, e = next(actual, None), next(expected, None)
    while a is not None or e is not None:
        result.keys += 1
        if e is None or (a is not None and a[0] < e[0]):
            assert a is not None  # the loop goes on while one of them is left
            yield "extra", a[0], a[1], None
            a = next(actual, None)
        elif a is None or e[0] < a[0]:
            yield "missing", e[0], None, e[1]
            e = next(expected, None)
        else:
            if a[1] != e[1]:
                yield "different", a[0], a[1], e[1]
            a, e = next(actual, None), next(expected, None)


def _note(
    result: PartitionVerify,
    kind: str,
    key: bytes,
    mine: bytes | None,
    theirs: bytes | None,
    codec: StoreCodec,
    max_examples: int,
) -> None:
    setattr(result, kind, getattr(result, kind) + 1)
    if len(result.examples) < max_examples:
        result.examples.append(
            Difference(kind, codec.decode_key(key), codec.decode_value(mine), codec.decode_value(theirs))
        )

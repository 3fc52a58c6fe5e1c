"""Restore: rebuild a store, then trim the changelog back to the checkpoint.

Restore: rebuild a store from a local checkpoint and its changelog, then trim the changelog back
to the checkpointed state (Samza's transactional state).

Given ``K``, the checkpointed changelog offset (inclusive: the last change that belongs to
committed state; ``None``: nothing was ever committed):

1. **Base.** Take the newest local checkpoint whose offset is ``<= K`` and below the
   changelog's true end, whose OFFSET file parses, whose database opens and whose every
   block passes its checksum (a full read: a checkpoint shares its SST files with the live
   store through hard links, so one damaged file damages both); copy it into a fresh live
   directory. The live directory itself is never trusted (after a crash it may be ahead of
   ``K``). Checkpoints ahead of ``K`` can never be used, damaged ones never again: both are
   deleted. No usable checkpoint (or an in-memory engine): start empty.
2. **Replay** the changelog from the base offset + 1 up to ``K`` inclusive straight into the
   raw engine, one WriteBatch per fetched batch (never through the changelog or cache layers);
   tombstones are deletes. Records the checkpoint's changelog fence rules out (a zombie's,
   written after a takeover by a lower ownership generation: ``samzapy.checkpoint.ChangelogFence``)
   are skipped.
3. **Trim.** Read every record after ``K`` up to the true end; for each distinct key, and for
   each key of a record skipped in step 2, send its value as of ``K`` (a tombstone when
   absent) to the changelog. The store needs no write: it was built from the records that
   count only, so it already holds exactly those values. Afterwards the changelog's last
   value per key equals the store again.

Progress (records, MB, rate, ETA) goes to the log every few seconds; totals go to the store's
metrics: ``restored-messages``, ``restored-bytes``, ``restore-time`` (ms), ``trimmed-messages``.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samzapy.checkpoint import generation_header
from samzapy.crashpoints import crash_point
from samzapy.errors import RestoreError
from samzapy.kafka.reading import batch_bytes
from samzapy.metrics import MetricsGroup
from samzapy.stores.base import RawStore
from samzapy.stores.changelog import ChangelogRecord, RestorableChangelog
from samzapy.stores.checkpoints import LocalCheckpoint, LocalCheckpoints
from samzapy.stores.rocksdb import StoreCorruptError

if TYPE_CHECKING:
    from samzapy.checkpoint import ChangelogFence
    from samzapy.stores.snapshot_restore import SnapshotSource

log = logging.getLogger(__name__)

#: Seconds between two progress lines of a long restore.
PROGRESS_EVERY_S = 5.0
#: Records per WriteBatch during replay (fetched batches are merged up to this size), and the
#: bytes (keys + values) that end a WriteBatch sooner, so large values do not make it large.
REPLAY_BATCH = 50_000
REPLAY_BATCH_BYTES = 8 << 20


@dataclass(frozen=True)
class RestoreStats:
    """What a restore did."""

    base_offset: int | None  # offset of the local checkpoint used, None: from scratch
    restored_messages: int
    restored_bytes: int
    trimmed_messages: int
    trim_writes: int
    restore_ms: float


class _Progress:
    """Logs records, MB, rate and ETA every few seconds.

    With ``metrics``, also keeps the store's ``restore-replayed-records`` and
    ``restore-target-records`` gauges current (the status page's progress bar).
    """

    def __init__(self, what: str, total: int | None, metrics: MetricsGroup | None = None) -> None:
        self.what = what
        self.total = total
        self.records = 0
        self.bytes = 0
        self.start = time.monotonic()
        self._next = self.start + PROGRESS_EVERY_S
        self._replayed = None if metrics is None else metrics.gauge("restore-replayed-records")
        if metrics is not None:
            metrics.gauge("restore-target-records").set(total or 0)
            metrics.gauge("restore-replayed-records").set(0)

    def add(self, records: int, size: int) -> None:
        self.records += records
        self.bytes += size
        if self._replayed is not None:
            self._replayed.set(self.records)
        now = time.monotonic()
        if now >= self._next:
            self._next = now + PROGRESS_EVERY_S
            log.info("%s", self.line(now))

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.records / elapsed
        text = (
            f"{self.what}: {self.records:,} records, {self.bytes / 1e6:.1f} MB in {elapsed:.1f}s "
            f"({rate:,.0f} records/s, {self.bytes / 1e6 / elapsed:.1f} MB/s)"
        )
        if self.total:
            left = max(self.total - self.records, 0)
            text += f", {self.records * 100 / self.total:.0f}% done, ETA {left / rate if rate else 0:.0f}s"
        return text


def _merged(
    batches: Iterable[Sequence[ChangelogRecord]], size: int, max_bytes: int = REPLAY_BATCH_BYTES
) -> Iterator[tuple[list[ChangelogRecord], int]]:
    """Fetched batches merged into larger ones.

    Fetched batches merged into (records, their bytes) of up to ``size`` records or
    ``max_bytes`` bytes (the batch that crosses a bound is included).
    """
    pending: list[ChangelogRecord] = []
    pending_bytes = 0
    for batch in batches:
        pending.extend(batch)
        pending_bytes += batch_bytes(batch)
        if len(pending) >= size or pending_bytes >= max_bytes:
            yield pending, pending_bytes
            pending, pending_bytes = [], 0
    if pending:
        yield pending, pending_bytes


def choose_base(raw: RawStore, checkpoints: LocalCheckpoints | None, k: int | None, end: int) -> int | None:
    """Step 1: reset ``raw`` to the newest usable local checkpoint; its offset, or ``None``."""
    if checkpoints is None or k is None:
        if checkpoints is not None:
            checkpoints.delete_all()  # nothing committed: no checkpoint can be valid
        raw.reset(None)
        return None
    for checkpoint in checkpoints.newest_first():
        if checkpoint.offset > k or checkpoint.offset >= end:
            log.info(
                "local checkpoint %s is at changelog offset %d, beyond the checkpointed %d "
                "(changelog end %d): deleted",
                checkpoint.path,
                checkpoint.offset,
                k,
                end,
            )
            checkpoints.delete(checkpoint)
            continue
        if _load_verified(raw, checkpoint):
            return checkpoint.offset
        checkpoints.delete(checkpoint)
    raw.reset(None)
    return None


def _load_verified(raw: RawStore, checkpoint: LocalCheckpoint) -> bool:
    """Make ``raw`` a copy of ``checkpoint`` and read all of it with checksums verified.

    Whether it can be trusted (a damaged one is logged, and left for the caller to delete).
    """
    started = time.monotonic()
    try:
        raw.reset(checkpoint.path)
        entries = raw.verify()
    except StoreCorruptError as exc:
        log.warning(
            "local checkpoint %s is damaged, not used (deleted; trying an older one, else the changelog): %s",
            checkpoint.path,
            str(exc),  # not the exception: its traceback would keep the damaged database open
        )
        return False
    log.info(
        "local checkpoint %s verified: %d entries, every checksum good, in %.0f ms",
        checkpoint.path,
        entries,
        (time.monotonic() - started) * 1000,
    )
    return True


_gc_pauses = 0
_gc_was_enabled = False
_gc_lock = threading.Lock()


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while records are decoded and written in bulk.

    A restore holds tens of thousands of decoded records at once (each a tuple, its header
    list and header tuple, a (key, value) pair): every 700 of them ran a young collection over
    the survivors, and the survivors then triggered full collections of the process's whole
    heap, about a third of a restore's CPU (round 5's profile of a window count's restore).
    A restore makes no reference cycles (its objects are freed by reference counting), so
    nothing is lost; cycles other threads make meanwhile are collected once it ends. Nests and
    overlaps (standby replicas restore on threads of their own): the collector comes back when
    the last pause ends, and only if it was on when the first began.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _ruled_out(batch: Sequence[ChangelogRecord], fence: ChangelogFence) -> set[bytes]:
    """The keys of the records of ``batch`` that ``fence`` rules out.

    Records up to the fence's start, and those that carry the owning generation's own header
    (nearly all of them), pass without a look at their headers: ``fence.skips`` for every
    record cost a tenth of a restore of small records.
    """
    start = -1 if fence.start is None else fence.start
    if not batch or batch[-1].offset <= start:
        return set()
    own, skips = generation_header(fence.generation), fence.skips
    return {
        r.key
        for r in batch
        if r.key is not None and r.offset > start and getattr(r, "headers", None) != own and skips(r)
    }


def changes(batch: Sequence[ChangelogRecord]) -> list[tuple[bytes, bytes | None]]:
    """The writes a batch of changelog records makes to the store.

    (key, value), a tombstone (``None``) as a delete; records without a key are not changes.
    """
    return [(r.key, r.value) for r in batch if r.key is not None]


def replay(
    raw: RawStore,
    changelog: RestorableChangelog,
    start: int,
    k: int,
    fence: ChangelogFence | None = None,
    skipped: set[bytes] | None = None,
    metrics: MetricsGroup | None = None,
) -> tuple[int, int]:
    """Step 2: write changelog records ``start..k`` into ``raw``; (records, bytes).

    Records ``fence`` rules out are not written; their keys are added to ``skipped``.
    ``metrics``: the store's group, whose restore gauges follow the progress.
    """
    progress = _Progress(f"restore of {changelog}", k + 1 - start, metrics)
    with cyclic_gc_paused():
        _replay_batches(raw, changelog, start, k, fence, skipped, progress)
    if progress.records:
        log.info("%s", progress.line(time.monotonic()))
    return progress.records, progress.bytes


def _replay_batches(
    raw: RawStore,
    changelog: RestorableChangelog,
    start: int,
    k: int,
    fence: ChangelogFence | None,
    skipped: set[bytes] | None,
    progress: _Progress,
) -> None:
    """The loop of :func:`replay`.

    A function of its own so that the last batch is freed when it returns, before the
    collector comes back (it would otherwise start by collecting that batch's survivors).
    """
    for batch, size in _merged(changelog.read(start, k + 1), REPLAY_BATCH):
        kept = batch
        if fence is not None:
            ruled_out = _ruled_out(batch, fence)
            if ruled_out:
                kept = [r for r in batch if not (r.key is not None and fence.skips(r))]
                if skipped is not None:
                    skipped.update(ruled_out)
        raw.put_all(changes(kept))
        progress.add(len(batch), size)
        crash_point("during-restore")


def trim(
    raw: RawStore,
    changelog: RestorableChangelog,
    start: int,
    end: int,
    skipped: set[bytes] | frozenset[bytes] = frozenset(),
) -> tuple[int, int]:
    """Step 3: undo changelog records ``start..end-1``.

    Step 3: undo changelog records ``start..end-1`` and rewrite the ``skipped`` keys with their
    values in ``raw``; (records undone, changelog writes).
    """
    progress = _Progress(f"trim of {changelog}", end - start)
    seen: set[bytes] = set(skipped)
    if seen:
        keys = sorted(seen)
        for key, value in zip(keys, raw.get_many(keys), strict=True):
            changelog.send(key, value)
        log.info("%s: %d keys of records from a fenced generation rewritten", changelog, len(keys))
    writes = len(seen)
    for batch in changelog.read(start, end):
        keys = [key for key in dict.fromkeys(key for key, _ in changes(batch)) if key not in seen]
        seen.update(keys)
        for key, value in zip(keys, raw.get_many(keys), strict=True):
            changelog.send(key, value)
        writes += len(keys)
        progress.add(len(batch), batch_bytes(batch))
        crash_point("during-trim")
    if progress.records:
        log.info("%s; %d keys set back to their checkpointed values", progress.line(time.monotonic()), writes)
    return progress.records, writes


def restore(
    raw: RawStore,
    changelog: RestorableChangelog,
    k: int | None,
    metrics: MetricsGroup,
    checkpoints: LocalCheckpoints | None = None,
    fence: ChangelogFence | None = None,
    snapshots: SnapshotSource | None = None,
) -> RestoreStats:
    """Run the three steps (module doc) for one store; ``checkpoints=None``: from scratch.

    ``fence`` (a ``samzapy.checkpoint.ChangelogFence``) says which records a zombie wrote.
    ``snapshots``: a blob store's snapshots of the store; before step 1, the newest usable one
    newer than the local checkpoints is downloaded among them (``stores/snapshot_restore.py``).

    Raises:
        RestoreError: the checkpointed offset lies beyond the changelog's end (the changelog
            was deleted or truncated since: the committed state is gone).
    """
    started = time.monotonic()
    end = changelog.end_offset()
    if k is not None and k >= end:
        msg = (
            f"checkpointed changelog offset {k} of {changelog} is beyond the changelog's end "
            f"({end}): the changelog lost committed state (deleted or recreated topic?). "
            "Delete the job's checkpoint to start from an empty store"
        )
        raise RestoreError(msg)
    if snapshots is not None and checkpoints is not None and k is not None:
        snapshots.fetch(checkpoints, k, fence, end)  # a local checkpoint now, if one was usable
    base = choose_base(raw, checkpoints, k, end)
    restored = restored_bytes = 0
    skipped: set[bytes] = set()
    if k is not None and (base is None or base < k):
        first = 0 if base is None else base + 1
        restored, restored_bytes = replay(raw, changelog, first, k, fence, skipped, metrics)
    trim_from = 0 if k is None else k + 1
    trimmed = writes = 0
    if trim_from < end or skipped:
        trimmed, writes = trim(raw, changelog, trim_from, end, skipped)
    changelog.set_known_offset(k)
    changelog.close_reader()
    elapsed_ms = (time.monotonic() - started) * 1000
    metrics.counter("restored-messages").inc(restored)
    metrics.counter("restored-bytes").inc(restored_bytes)
    metrics.counter("trimmed-messages").inc(trimmed)
    metrics.gauge("restore-time").set(round(elapsed_ms))
    metrics.histogram("restore-latency").observe(elapsed_ms / 1000)
    log.info(
        "restored %s %s from %s: %d records (%.1f MB) replayed, %d trimmed in %.0f ms",
        changelog,
        "with nothing committed yet" if k is None else f"to changelog offset {k}",
        "scratch" if base is None else f"local checkpoint {base}",
        restored,
        restored_bytes / 1e6,
        trimmed,
        elapsed_ms,
    )
    return RestoreStats(base, restored, restored_bytes, trimmed, writes, elapsed_ms)

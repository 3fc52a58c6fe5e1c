"""What both tools share.

The job's configuration, store selection, the tools' errors and the way a changelog is read by a
tool (read-only unless asked, with progress).

The tools reuse the job's own code: configuration through :mod:`samzapy.config`, serdes
through :class:`samzapy.serdes.SerdeResolver`, stores through
:func:`samzapy.stores.factory.build_store` and restore through
:meth:`samzapy.stores.engine.StorageEngine.restore`. Nothing here builds or restores a store
by other means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samzapy.config import Config, JobConfig, StoreConfig, load_config, parse_job_config
from samzapy.errors import BadArgumentError, ConfigError, SamzapyError
from samzapy.kafka.admin import TopicAdmin
from samzapy.kafka.broker import resolve_bootstrap_servers
from samzapy.kafka.changelog import KafkaChangelog
from samzapy.kafka.reading import batch_bytes

if TYPE_CHECKING:
    from samzapy.records import RecordSink


class ToolError(SamzapyError):
    """A state tool could not do what it was asked (the CLIs exit 1)."""


class BadInputError(ToolError, BadArgumentError):
    """An argument names something that does not exist or does not parse (the CLIs exit 2)."""


@dataclass(frozen=True)
class JobSetup:
    """A job's configuration as the tools need it."""

    config: Config
    job: JobConfig

    @property
    def source(self) -> str:
        """The config file the job was read from."""
        return self.config.source

    def bootstrap_servers(self) -> str:
        """Where the job's changelogs are (``embedded`` starts the dev broker, as the job does)."""
        return resolve_bootstrap_servers(self.job.consumer_bootstrap_servers)


def load_job(config_path: str, overrides: Sequence[str] = ()) -> JobSetup:
    """Read and validate a job's config (a path or a ``file:///`` URI).

    Raises:
        BadInputError: the file is missing or the configuration is invalid (every problem listed).
    """
    try:
        config = load_config(config_path, overrides)
        return JobSetup(config, parse_job_config(config))
    except ConfigError as exc:
        raise BadInputError(str(exc)) from exc


def select_stores(setup: JobSetup, names: Sequence[str], *, logged_only: bool = False) -> list[StoreConfig]:
    """The stores named ``names`` (all stores when empty; only logged RocksDB ones with ``logged_only``).

    Raises:
        BadInputError: a name is not a store of the config, or (``logged_only``) a named store
            has no changelog or is in-memory.
    """
    stores = setup.job.stores
    if not stores:
        msg = f"the config {setup.source} defines no stores (no stores.<name>.factory key)"
        raise BadInputError(msg)
    for name in names:
        if name not in stores:
            msg = f"store '{name}' is not in the config {setup.source}: its stores are {', '.join(stores)}"
            raise BadInputError(msg)
    chosen = [stores[n] for n in dict.fromkeys(names)] if names else list(stores.values())
    if not logged_only:
        return chosen
    for store in chosen:
        if names and store.changelog is None:
            msg = f"store '{store.name}' has no changelog (stores.{store.name}.changelog): nothing to restore"
            raise BadInputError(msg)
        if names and store.engine != "rocksdb":
            msg = f"store '{store.name}' is an in-memory store: it lives only inside the job, not on disk"
            raise BadInputError(msg)
    found = [s for s in chosen if s.changelog is not None and s.engine == "rocksdb"]
    if not found:
        msg = f"the config {setup.source} has no logged RocksDB store (one with stores.<name>.changelog)"
        raise BadInputError(msg)
    return found


def changelog_partitions(servers: str, store: StoreConfig, wanted: Sequence[int]) -> list[int]:
    """The partitions (= tasks) of ``store``'s changelog to work on: ``wanted`` or all of them.

    Raises:
        ToolError: the changelog topic does not exist.
        BadInputError: a wanted partition is beyond the topic's partitions.
    """
    assert store.changelog is not None
    topic = store.changelog.stream
    with TopicAdmin(servers) as admin:
        count = admin.partition_count(topic)
    if count is None:
        msg = (
            f"the changelog topic '{topic}' of store '{store.name}' does not exist on {servers}: "
            "has the job ever run against this broker?"
        )
        raise ToolError(msg)
    for partition in wanted:
        if not 0 <= partition < count:
            msg = f"--partition {partition} is out of range: changelog '{topic}' has {count} partitions"
            raise BadInputError(msg)
    return sorted(set(wanted)) if wanted else list(range(count))


class ToolChangelog(KafkaChangelog):
    """A :class:`KafkaChangelog` as the tools read it.

    * :meth:`pin_end` fixes the end offset at the true end it has now, so that a restore "to
      the end" cannot turn into a trim when a live job appends meanwhile: with the end pinned
      at ``k + 1`` the restore of :mod:`samzapy.stores.restore` replays ``..k`` and trims
      nothing.
    * every batch read is reported to ``on_batch(records, bytes)`` (progress).

    ``producer=None`` opens the changelog read-only (a send raises ``ChangelogWriteRefused``).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        producer: RecordSink | None,
        bootstrap_servers: str,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> None:
        super().__init__(topic, partition, producer, bootstrap_servers)
        self._pinned_end: int | None = None
        self._on_batch = on_batch
        self.records_read = 0

    def pin_end(self, end: int | None = None) -> int:
        """Fix the end offset at ``end`` (default: the true end now); returns it."""
        self._pinned_end = super().end_offset() if end is None else end
        return self._pinned_end

    def end_offset(self) -> int:
        """The pinned end, else the true end."""
        return self._pinned_end if self._pinned_end is not None else super().end_offset()

    def read(self, start: int, stop: int | None = None) -> Iterator[list[Any]]:
        """Batches from ``start`` to ``stop`` (default: the pinned end, else the true end)."""
        if stop is None:
            stop = self._pinned_end
        for batch in super().read(start, stop):
            self.records_read += len(batch)
            if self._on_batch is not None:
                self._on_batch(len(batch), batch_bytes(batch))
            yield batch

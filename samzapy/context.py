"""The :class:`samzapy.task.TaskContext` handed to ``InitableTask.init``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from samzapy.config.app import AppConfig
from samzapy.config.model import JobConfig, StreamConfig
from samzapy.errors import ConfigError
from samzapy.metrics import MetricsGroup
from samzapy.streams import SystemStream

if TYPE_CHECKING:
    from samzapy.stores.versioned import VersionedStore


class StoreContext:
    """A task's context: its name, partition, inputs, application config, stores and metrics.

    The task reads its application keys through :attr:`config`, a read-only
    :class:`~samzapy.config.AppConfig`; samzapy's own keys are not in it. What a task needs of
    those is here, validated: :attr:`inputs`, :meth:`stream`, :meth:`get_store`.
    """

    def __init__(
        self,
        task_name: str,
        partition: int,
        job: JobConfig,
        stores: Mapping[str, Any],
        metrics: MetricsGroup,
    ) -> None:
        """Hold what :meth:`samzapy.task.InitableTask.init` may read.

        Args:
            task_name: ``Partition N``.
            partition: N.
            job: the job's validated configuration; the task sees its application keys
                (``job.app_config``), inputs and stream settings, not the rest.
            stores: the task's store instances by name.
            metrics: the task's metrics group.
        """
        self._task_name = task_name
        self._partition = partition
        self._job = job
        self._stores = stores
        self._metrics = metrics

    @property
    def task_name(self) -> str:
        """``Partition N``."""
        return self._task_name

    @property
    def partition(self) -> int:
        """The partition number this task consumes of every input."""
        return self._partition

    @property
    def inputs(self) -> tuple[SystemStream, ...]:
        """The job's input streams (``task.inputs``), in order.

        The task reads partition :attr:`partition` of each that has it.
        """
        return self._job.inputs

    @property
    def config(self) -> AppConfig:
        """The job's application keys (those outside samzapy's reserved prefixes), read-only.

        Its typed getters name ``path:line`` when a value is bad.
        """
        return self._job.app_config

    def stream(self, system_stream: SystemStream) -> StreamConfig:
        """The settings of a stream (``systems.<system>.streams.<stream>.*``).

        The system's defaults are filled in, e.g. ``context.stream(out).partitions``.
        """
        return self._job.stream(system_stream)

    @property
    def metrics(self) -> MetricsGroup:
        """The task's metrics group."""
        return self._metrics

    def get_versioned_store(self, name: str, *, namespace: bytes = b"") -> VersionedStore:
        """Store ``name`` as a versioned table (:class:`~samzapy.stores.versioned.VersionedStore`).

        It keeps ``stores.<name>.versioned.history.ms`` of history. The store holds bytes (no
        serdes), so other operators may share it under other namespaces.

        Raises:
            ConfigError: the store is not configured, or has no ``versioned.history.ms``.
        """
        from samzapy.stores.versioned import VersionedStore  # the stores package imports this module

        store = self.get_store(name)
        history = self._job.stores[name].versioned_history_ms
        if history is None:
            msg = (
                f"task {self._task_name} asked for store '{name}' as a versioned table, but "
                f"stores.{name}.versioned.history.ms is not set; set it to the history to keep, in ms"
            )
            raise ConfigError(msg)
        return VersionedStore(store, history, namespace=namespace)

    def get_store(self, name: str) -> Any:
        """The task's instance of store ``name``.

        Raises:
            ConfigError: no ``stores.<name>.factory`` is configured; the message lists the
                configured stores.
        """
        store = self._stores.get(name)
        if store is None:
            known = ", ".join(sorted(self._stores)) or "none"
            msg = (
                f"task {self._task_name} asked for store '{name}', which is not configured "
                f"(configured stores: {known}); add stores.{name}.factory=rocksdb to the job config"
            )
            raise ConfigError(msg)
        return store

"""The :class:`samzapy.task.TaskContext` handed to ``InitableTask.init``."""

from __future__ import annotations

from typing import Any

from samzapy.errors import ConfigError
from samzapy.metrics import MetricsGroup


class StoreContext:
    """A task's context: its name, partition, config, stores and metrics."""

    def __init__(
        self,
        task_name: str,
        partition: int,
        config: Any,
        stores: dict[str, Any],
        metrics: MetricsGroup,
    ) -> None:
        self._task_name = task_name
        self._partition = partition
        self._config = config
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
    def config(self) -> Any:
        """The job's raw :class:`samzapy.config.Config` (application keys included)."""
        return self._config

    @property
    def metrics(self) -> MetricsGroup:
        """The task's metrics group."""
        return self._metrics

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

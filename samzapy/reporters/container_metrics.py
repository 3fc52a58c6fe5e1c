"""Container metrics Samza has that are derived from what tasks and inputs already count.

They are gauges computed when a reporter reads them, never updated per message:

* ``container``: ``process-calls``, ``messages-actually-processed``, ``process-ns`` and
  ``window-calls`` summed over the container's tasks (``window-ns``, ``commit-calls`` and
  ``commit-ns`` are counted by the run loop itself);
* ``task.<task>``: ``process-calls`` (one ``process`` call per message);
* ``input.<system>.<stream>.<partition>``: ``offset`` (the next offset to process),
  ``high-watermark`` (the broker's, from the consumer's last fetch) and ``lag`` (the
  difference, Samza's ``messages-behind-high-watermark``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from samzapy.metrics import Counter, MetricsRegistry

if TYPE_CHECKING:
    from samzapy.container.inputs import InputPartition, Inputs
    from samzapy.container.task_instance import TaskInstance
    from samzapy.kafka.consumer import Consumer


def _sum(counters: list[Counter]) -> Callable[[], int]:
    return lambda: sum(c.value for c in counters)


def _live_sum(tasks: Callable[[], Iterable[TaskInstance]], name: str) -> Callable[[], int]:
    """The sum of counter ``name`` over the tasks the container runs at read time.

    Group mode adds and removes tasks while it runs.
    """
    return lambda: sum(t.metrics.counter(name).value for t in list(tasks()))


def register_container_gauges(
    registry: MetricsRegistry, tasks: Callable[[], Iterable[TaskInstance]], inputs: Inputs | None
) -> None:
    """Register the gauges of the module docstring.

    ``tasks`` returns the container's ``TaskInstance`` objects at the time of a read; ``inputs``
    is the container's ``Inputs`` (or ``None``).

    Every counter summed exists from its task's creation, so a read from a reporter's thread
    never creates a metric.
    """
    container = registry.group("container")
    container.gauge("process-calls", _live_sum(tasks, "messages-actually-processed"))
    container.gauge("messages-actually-processed", _live_sum(tasks, "messages-actually-processed"))
    container.gauge("process-ns", _live_sum(tasks, "process-ns"))
    container.gauge("window-calls", _live_sum(tasks, "window-calls"))
    for task in list(tasks()):
        register_task_gauges(task)
    if inputs is not None:
        register_input_gauges(registry, inputs.consumer, list(inputs.partitions.values()))


def register_task_gauges(task: TaskInstance) -> None:
    """``process-calls`` of one task (one ``process`` call per message)."""
    task.metrics.gauge("process-calls", _sum([task.metrics.counter("messages-actually-processed")]))


def register_input_gauges(
    registry: MetricsRegistry, consumer: Consumer, partitions: list[InputPartition]
) -> None:
    """``offset``, ``high-watermark`` and ``lag`` of each of ``partitions`` (``InputPartition``)."""
    for part in partitions:
        _register_input(registry, consumer, part)


def forget_input_gauges(registry: MetricsRegistry, inputs: Inputs) -> None:
    """Remove the input groups of partitions ``inputs`` no longer reads (their task left).

    A stale lag of a partition another member reads would mislead.
    """
    read = {f"input.{part.ssp}" for part in inputs.partitions.values()}
    for group in registry.groups():
        if group.name.startswith("input.") and group.name not in read:
            registry.remove(group.name)


def _register_input(registry: MetricsRegistry, consumer: Consumer, part: InputPartition) -> None:
    group = registry.group(f"input.{part.ssp}")

    def offset() -> int:
        position: int = part.task.offsets.get(part.ssp, part.start_offset)
        return position

    def high_watermark() -> int:
        try:
            high = consumer.highwater(part.tp)
        except Exception:  # noqa: BLE001 - unassigned while closing: fall back to the start end
            high = None
        return part.start_end if high is None else high

    group.gauge("offset", offset)
    group.gauge("high-watermark", high_watermark)
    group.gauge("lag", lambda: max(0, high_watermark() - offset()))

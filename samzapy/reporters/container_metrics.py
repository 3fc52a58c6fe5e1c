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
from typing import Any

from samzapy.metrics import Counter, MetricsRegistry


def _sum(counters: list[Counter]) -> Callable[[], int]:
    return lambda: sum(c.value for c in counters)


def register_container_gauges(registry: MetricsRegistry, tasks: Iterable[Any], inputs: Any) -> None:
    """Register the gauges of the module docstring for ``tasks`` (``TaskInstance``) and
    ``inputs`` (the container's ``Inputs``, or ``None``).

    The counters summed are looked up here, on the run loop's thread, so that reading the
    gauges from a reporter's thread never creates a metric.
    """
    tasks = list(tasks)
    container = registry.group("container")
    processed = [t.metrics.counter("messages-actually-processed") for t in tasks]
    container.gauge("process-calls", _sum(processed))
    container.gauge("messages-actually-processed", _sum(processed))
    container.gauge("process-ns", _sum([t.metrics.counter("process-ns") for t in tasks]))
    container.gauge("window-calls", _sum([t.metrics.counter("window-calls") for t in tasks]))
    for task, counter in zip(tasks, processed, strict=True):
        task.metrics.gauge("process-calls", _sum([counter]))
    if inputs is not None:
        for part in inputs.partitions.values():
            _register_input(registry, inputs.consumer, part)


def _register_input(registry: MetricsRegistry, consumer: Any, part: Any) -> None:
    group = registry.group(f"input.{part.ssp}")

    def offset() -> int:
        return part.task.offsets.get(part.ssp, part.start_offset)

    def high_watermark() -> int:
        try:
            high = consumer.highwater(part.tp)
        except Exception:  # noqa: BLE001 - unassigned while closing: fall back to the start end
            high = None
        return part.start_end if high is None else high

    group.gauge("offset", offset)
    group.gauge("high-watermark", high_watermark)
    group.gauge("lag", lambda: max(0, high_watermark() - offset()))

"""Names of streams and partitions: ``SystemStream`` and ``SystemStreamPartition``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SystemStream:
    """A stream of a system, written ``system.stream`` in config (``kafka.pageviews``).

    >>> SystemStream.parse("kafka.page-views")
    SystemStream(system='kafka', stream='page-views')
    >>> str(SystemStream("kafka", "a.b"))
    'kafka.a.b'
    """

    system: str
    stream: str

    @classmethod
    def parse(cls, text: str) -> SystemStream:
        """Parse ``system.stream``; the stream part may itself contain dots.

        Raises:
            ValueError: when there is no dot or either part is empty.
        """
        system, dot, stream = text.strip().partition(".")
        if not dot or not system or not stream:
            msg = f"'{text}' is not a stream name of the form 'system.stream' (e.g. 'kafka.pageviews')"
            raise ValueError(msg)
        return cls(system, stream)

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}"


@dataclass(frozen=True, order=True)
class SystemStreamPartition:
    """One partition of a stream: the unit a task consumes and a checkpoint records.

    >>> str(SystemStreamPartition("kafka", "pageviews", 3))
    'kafka.pageviews.3'
    """

    system: str
    stream: str
    partition: int

    @property
    def system_stream(self) -> SystemStream:
        """The stream this partition belongs to."""
        return SystemStream(self.system, self.stream)

    @classmethod
    def parse(cls, text: str) -> SystemStreamPartition:
        """Parse ``system.stream.partition`` as written by ``__str__``."""
        head, dot, number = text.rpartition(".")
        if not dot or not number.isdigit():
            msg = f"'{text}' is not a partition of the form 'system.stream.N'"
            raise ValueError(msg)
        stream = SystemStream.parse(head)
        return cls(stream.system, stream.stream, int(number))

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}.{self.partition}"


def task_name_for(partition: int) -> str:
    """The task name Samza's GroupByPartition gives to the task of ``partition``.

    >>> task_name_for(2)
    'Partition 2'
    """
    return f"Partition {partition}"

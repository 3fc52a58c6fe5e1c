"""Where the containers of a job answer queries.

Each announces ``container id -> URL`` in a small compacted topic of its own job,
``__samzapy_query_<job>_<id>`` (one partition, keyed by container id, latest announcement wins).

A separate topic, not the checkpoint topic: checkpoint readers (restore, fencing, the
checkpoint tool) then never meet records that are not checkpoints.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, cast

from samzapy.kafka.reading import read_partition, reader_consumer
from samzapy.records import TopicPartition

if TYPE_CHECKING:
    from samzapy.records import RecordSink

log = logging.getLogger(__name__)

#: A directory is read again at most this often (a miss or an unreachable peer asks for it).
REFRESH_EVERY_S = 1.0


def directory_topic(job_name: str, job_id: str) -> str:
    """The announcement topic of a job.

    >>> directory_topic("page views", "1")
    '__samzapy_query_page_views_1'
    """
    return f"__samzapy_query_{job_name}_{job_id}".replace(" ", "_")


def announcement(container_id: int, url: str, tasks: list[str]) -> tuple[bytes, bytes]:
    """The record (key, value) by which a container announces its query URL and tasks."""
    value = {"container": container_id, "url": url, "tasks": tasks, "time_ms": int(time.time() * 1000)}
    return str(container_id).encode(), json.dumps(value).encode()


def announce(producer: RecordSink, topic: str, container_id: int, url: str, tasks: list[str]) -> None:
    """Send this container's announcement through ``producer`` and wait for the ack."""
    key, value = announcement(container_id, url, tasks)
    producer.send(topic, key, value, partition=0)
    producer.flush()
    log.info("query: container %d announced %s in %s", container_id, url, topic)


class Directory:
    """The query URLs of a job's containers, read from the announcement topic on demand.

    Thread-safe: the query server's threads share one directory.
    """

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self._urls: dict[int, str] = {}
        self._read_at = 0.0
        self._lock = threading.Lock()

    def url(self, container_id: int, *, refresh: bool = False) -> str | None:
        """The announced URL of ``container_id``; read the topic again when unknown or asked."""
        with self._lock:
            if refresh or container_id not in self._urls:
                self._refresh()
            return self._urls.get(container_id)

    def known(self) -> dict[int, str]:
        """Every announced container and its URL.

        Read again when the last read is older than :data:`REFRESH_EVERY_S` (a container that
        announces later is seen then).
        """
        with self._lock:
            self._refresh()
            return dict(self._urls)

    def _refresh(self) -> None:
        if time.monotonic() - self._read_at < REFRESH_EVERY_S:
            return
        consumer = reader_consumer(self.bootstrap_servers)
        try:
            urls: dict[int, str] = {}
            for batch in read_partition(consumer, TopicPartition(self.topic, 0), 0):
                for record in batch:
                    key = cast(bytes, record.key)  # every record of the directory has its key
                    if record.value is None:
                        urls.pop(int(key), None)
                    else:
                        urls[int(key)] = json.loads(record.value)["url"]
            self._urls = urls
        finally:
            consumer.close()
            self._read_at = time.monotonic()

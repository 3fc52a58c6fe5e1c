"""Starting and stopping a container's query service (``job.query.port``).

Started early in the container's start-up, before any store is restored, so that queries
answer "restoring" from the first moment; stopped first at shutdown, before the stores close.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

from samzapy.query.directory import Directory, announce, directory_topic
from samzapy.query.http import QueryHttpServer, add_query_route
from samzapy.query.service import QueryService
from samzapy.query.sources import LocalCheckpointSource
from samzapy.reporters.prometheus import MetricsHttpServer
from samzapy.streams import task_name_for

if TYPE_CHECKING:
    from samzapy.container.run_loop import Container
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.records import RecordSink

log = logging.getLogger(__name__)

_ANY_ADDRESS = ("0.0.0.0", "::", "")


class RunningQueries:
    """A started query service and the server it answers on; :meth:`stop` undoes both."""

    def __init__(self, service: QueryService, server: QueryHttpServer | None, url: str) -> None:
        self.service = service
        self.server = server
        self.url = url

    def stop(self) -> None:
        """Stop answering (waits for a read in progress), then close the port if it is ours."""
        self.service.close()
        if self.server is not None:
            self.server.stop()


def advertised_url(host: str, port: int, advertised: str | None) -> str:
    """The URL other containers and clients use to reach this one.

    >>> advertised_url("127.0.0.1", 8000, None), advertised_url("0.0.0.0", 80, "node-1")
    ('http://127.0.0.1:8000', 'http://node-1:80')
    """
    if advertised is None:
        advertised = socket.gethostname() if host in _ANY_ADDRESS else host
    return f"http://{advertised}:{port}"


def start_queries(
    container: Container, task_count: int, bootstrap_servers: str, admin: TopicAdmin, producer: RecordSink
) -> RunningQueries | None:
    """Start the query service of ``container`` if ``job.query.port`` is set.

    ``container`` is a ``Container``. The service's URL is announced through ``producer`` (in
    a topic ``admin`` creates); ``None`` when queries are off.

    Shares the port of a Prometheus reporter configured on the same port, else binds its own.
    """
    job = container.job
    if job.query_port is None:
        return None
    topic = directory_topic(job.job_name, job.job_id)
    service = QueryService(
        job,
        container.container_id,
        task_count,
        lambda: container.tasks,
        container.status,
        registry=container.registry,
        committed=lambda: dict(getattr(container, "_last_checkpoints", {})),  # read-only view
        directory=Directory(bootstrap_servers, topic) if job.container_count > 1 else None,
        stale=LocalCheckpointSource(job),
    )
    shared = next(
        (
            r
            for r in container.reporters.running
            if isinstance(r, MetricsHttpServer) and r.spec.port == job.query_port
        ),
        None,
    )
    server = None
    if shared is not None:
        add_query_route(shared.http, service)
        host, port = shared.spec.host, shared.port
    else:
        server = QueryHttpServer(service, job.query_host, job.query_port, container.reporters.token)
        server.start()
        host, port = job.query_host, server.port
    url = advertised_url(host, port, job.query_advertised_host)
    log.info(
        "interactive queries at %s/stores (container %d%s)",
        url,
        container.container_id,
        ", shared with the Prometheus reporter" if shared is not None else "",
    )
    admin.ensure_topic(topic, 1, compact=True, replication_factor=job.replication_factor)
    announce(
        producer, topic, container.container_id, url, [task_name_for(p) for p in service.placement.mine()]
    )
    return RunningQueries(service, server, url)

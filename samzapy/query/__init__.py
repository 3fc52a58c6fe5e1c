"""Interactive queries: read-only lookups on a running job's stores over HTTP.

Served on ``job.query.port``; :class:`StateClient` makes them from Python.

``GET /stores/<store>/keys/<key>``, ``GET /stores/<store>/range?from=&to=&limit=`` and
``GET /stores/<store>/partitions`` on any container; a key owned by another container is
answered through it. Reads see the owner's committed-or-newer state (see
:mod:`samzapy.query.sources` for why, and docs/queries.md for the whole contract).
"""

from samzapy.query.client import StateClient, StateQueryError
from samzapy.query.formats import QueryError
from samzapy.query.service import QueryService
from samzapy.query.sources import LocalCheckpointSource, StaleSource, StoreReader

__all__ = [
    "LocalCheckpointSource",
    "QueryError",
    "QueryService",
    "StaleSource",
    "StateClient",
    "StateQueryError",
    "StoreReader",
]

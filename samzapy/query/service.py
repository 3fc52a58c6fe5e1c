"""The query service of one container.

Answers ``/stores/...`` requests from the stores of its own tasks and, for keys owned by tasks
of other containers, through those containers.

Which task holds a key (docs/queries.md, "Locating a key"):

1. the **owner**: ``murmur2(serialised key) % task count``, the task that consumes the
   input partition Kafka's default partitioner sends that key to. For a store keyed like the
   input (the usual case) the key can be nowhere else, and the owner's answer is final when
   it has the key;
2. if the owner does not have it, **every other task** is searched, this container's first,
   then each other container (asked once each, for all of its tasks): stores keyed otherwise
   (``(key, window)`` tuples, re-keyed data) are still found. A key in no task is a 404.

A global side-input store (``stores.S.side.inputs.scope=global``) is one shared copy per
container: any task of the container answers, and nothing is asked elsewhere.

``?partition=N`` asks one task only. A request forwarded by another container carries
``scope=local`` and is answered from this container's tasks alone, so requests never loop.

A task that is restoring answers 503 with the reason, never data that may be older than the
last commit, unless the request says ``allow_stale=true``: then a :class:`StaleSource` (the
newest checkpoint on this machine, the task's own or a standby replica's) answers, flagged
``"stale": true``. A standby copy also answers for a task of another container whose
container does not answer.
"""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from samzapy.config.model import JobConfig
from samzapy.errors import StorageFailure
from samzapy.health import RESTORING, RUNNING, ContainerStatus
from samzapy.http_server import clip
from samzapy.kafka.partitioner import partition_for_key
from samzapy.metrics import MetricsRegistry
from samzapy.query.answer import Answer, flag_param, int_param
from samzapy.query.directory import Directory
from samzapy.query.formats import QueryError, check_format, key_bytes, render
from samzapy.query.peers import Peers
from samzapy.query.routing import Placement, StaticPlacement
from samzapy.query.sources import LiveReader, StaleSource, StoreReader
from samzapy.serdes import SerdeResolver
from samzapy.store_codec import StoreCodec
from samzapy.stores.engine import StorageEngine
from samzapy.streams import task_name_for

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
COMMITTED_OR_NEWER = "committed-or-newer"


class QueryService:
    """Answers queries on the stores of one container (thread-safe; see the module doc).

    Args:
        job: the job's configuration (stores, serdes, container count).
        container_id: this container.
        task_count: the job's task count (the partition count of its widest input).
        tasks: returns the container's live task instances (``TaskInstance``) right now.
        status: the container's status, per task.
        registry: the container's metrics (input lag).
        committed: returns the last checkpoint written per task name (``TaskCheckpoint``).
        directory: where other containers announced their URLs (``None``: one container).
        stale: where restoring tasks may be read from with ``allow_stale=true``.
    """

    def __init__(
        self,
        job: JobConfig,
        container_id: int,
        task_count: int,
        tasks: Callable[[], list[Any]],
        status: ContainerStatus,
        *,
        registry: MetricsRegistry | None = None,
        committed: Callable[[], dict[str, Any]] | None = None,
        directory: Directory | None = None,
        stale: StaleSource | None = None,
    ) -> None:
        self.job = job
        self.container_id = container_id
        self.task_count = task_count
        self.placement: Placement = StaticPlacement(container_id, job.container_count, task_count)
        self._tasks = tasks
        self.status = status
        self.registry = registry
        self._committed = committed or dict
        self.directory = directory
        self.peers = Peers(container_id, directory)
        self.stale = stale
        serdes = SerdeResolver(job)
        self._codecs = {name: StoreCodec(name, *serdes.for_store(cfg)) for name, cfg in job.stores.items()}
        # A global side-input store is one copy per container that every task shares: any one
        # task answers for all of it, and other containers hold the same data.
        self._global = {
            name
            for name, cfg in job.stores.items()
            if getattr(cfg, "side_inputs", None) and getattr(cfg, "side_inputs_scope", None) == "global"
        }
        # One read at a time, and none once closed: the container closes its stores after
        # close() returns, so no read may still be running then.
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """Stop answering from the stores (waits for a read in progress)."""
        with self._lock:
            self._closed = True

    # ----------------------------------------------------------------- entry point
    def handle(self, target: str) -> Answer:
        """The answer to ``GET target`` (a path with its query string)."""
        parsed = urllib.parse.urlsplit(target)
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()}
        parts = parsed.path.strip("/").split("/")
        try:
            if parts == ["stores"]:
                return self.index()
            if len(parts) < 3 or parts[0] != "stores":
                msg = f"unknown path '{clip(parsed.path)}': see /stores"
                raise QueryError(msg, 404)
            store = urllib.parse.unquote(parts[1])
            if parts[2] == "keys" and len(parts) >= 4:
                key = urllib.parse.unquote("/".join(parts[3:]))
                return self.get(store, key, params)
            if parts[2:] == ["range"]:
                return self.range(store, params)
            if parts[2:] == ["partitions"]:
                return self.partitions(store)
            msg = (
                f"unknown path '{clip(parsed.path)}': use /stores/{store}/keys/<key>, /stores/{store}/range "
                f"or /stores/{store}/partitions"
            )
            raise QueryError(msg, 404)
        except QueryError as error:
            return Answer(error.status, {"error": str(error), "container": self.container_id})
        except StorageFailure as error:  # a damaged store: an error, never a partial answer
            return Answer(503, {"error": str(error), "container": self.container_id})

    def _codec(self, store: str) -> StoreCodec:
        codec = self._codecs.get(store)
        if codec is None:
            known = ", ".join(sorted(self._codecs)) or "none"
            msg = f"store '{clip(store)}' is not a store of job '{self.job.job_name}' (stores: {known})"
            raise QueryError(msg, 404)
        return codec

    # ----------------------------------------------------------------- endpoints
    def index(self) -> Answer:
        """``/stores``: the job's stores with their serdes, and this container's tasks."""
        stores = {
            name: {
                "key_serde": cfg.key_serde,
                "msg_serde": cfg.msg_serde,
                "changelog": str(cfg.changelog) if cfg.changelog else None,
            }
            for name, cfg in self.job.stores.items()
        }
        tasks = [task_name_for(p) for p in self.placement.mine()]
        return Answer(
            200, {"job": self.job.job_name, "container": self.container_id, "stores": stores, "tasks": tasks}
        )

    def get(self, store: str, text: str, params: dict[str, str]) -> Answer:
        """``/stores/<store>/keys/<key>``: the value of one key (module doc for where)."""
        codec = self._codec(store)
        fmt = check_format(params.get("format"))
        key = key_bytes(codec, text, fmt)
        allow_stale = flag_param(params, "allow_stale")
        local_only = params.get("scope") == "local"
        blocked: dict[str, str] = {}
        path = f"/stores/{_q(store)}/keys/{_q(text)}"
        explicit = "partition" in params
        mine = self.placement.mine()
        if store in self._global and not explicit:
            found = self._get_local(store, key, mine[:1], fmt, allow_stale, blocked)
            return found or self._missing(store, text, blocked)
        if explicit:
            first: int | None = int_param(params, "partition", 0, 0, self.task_count - 1)
        else:
            first = None if local_only else partition_for_key(key, self.task_count)
        if first is not None:
            if first in mine:
                found = self._get_local(store, key, [first], fmt, allow_stale, blocked)
            elif local_only:
                blocked[task_name_for(first)] = f"not a task of container {self.container_id}"
                found = None
            else:
                found = self._ask_owner(store, key, first, fmt, path, params, blocked)
            if found is not None or explicit:
                return found or self._missing(store, text, blocked)
        others = [p for p in mine if p != first]
        found = self._get_local(store, key, others, fmt, allow_stale, blocked)
        if found is None and not local_only:
            for owner in self.placement.others():
                found = self.peers.ask(owner, path, params, blocked)
                if found is not None:
                    break
        return found or self._missing(store, text, blocked)

    def _ask_owner(
        self,
        store: str,
        key: bytes,
        partition: int,
        fmt: str,
        path: str,
        params: dict[str, str],
        blocked: dict[str, str],
    ) -> Answer | None:
        """Ask the container that runs task ``partition``.

        With ``allow_stale``, a local stale copy when it cannot answer.
        """
        owner = self.placement.owner(partition)
        if owner is None:
            blocked[task_name_for(partition)] = "no member of the group announced a query address for it"
            return None
        found = self.peers.ask(owner, path, {**params, "partition": str(partition)}, blocked)
        if found is None and blocked and flag_param(params, "allow_stale"):  # the owner cannot answer
            found = self._get_stale_copy(store, key, partition, fmt)
        return found

    def _get_local(
        self,
        store: str,
        key: bytes,
        partitions: list[int],
        fmt: str,
        allow_stale: bool,
        blocked: dict[str, str],
    ) -> Answer | None:
        codec = self._codec(store)
        for partition in partitions:
            with self._lock:
                reader, stale = self._reader(store, partition, allow_stale, blocked)
                if reader is None:
                    continue
                try:
                    value = reader.get(key)
                finally:
                    if stale:
                        reader.close()
            if value is not None:
                return Answer(
                    200,
                    {
                        "store": store,
                        "key": render(key, codec.key_serde, fmt),
                        "value": render(value, codec.msg_serde, fmt),
                        **self._where(partition, reader, stale),
                    },
                )
        return None

    def _get_stale_copy(self, store: str, key: bytes, partition: int, fmt: str) -> Answer | None:
        """The value from a stale copy of another container's task on this machine.

        A standby replica's checkpoint, read when the owner cannot answer and stale reads are
        allowed.
        """
        if self.stale is None:
            return None
        with self._lock:
            reader = None if self._closed else self.stale.reader(store, partition)
            if reader is None:
                return None
            try:
                value = reader.get(key)
            finally:
                reader.close()
        if value is None:
            return None
        codec = self._codec(store)
        return Answer(
            200,
            {
                "store": store,
                "key": render(key, codec.key_serde, fmt),
                "value": render(value, codec.msg_serde, fmt),
                **self._where(partition, reader, True),
            },
        )

    def _where(self, partition: int, reader: StoreReader, stale: bool) -> dict[str, Any]:
        return {
            "task": task_name_for(partition),
            "container": self.container_id,
            "source": reader.source,
            "stale": stale,
            "consistency": "stale" if stale else COMMITTED_OR_NEWER,
        }

    def _missing(self, store: str, text: str, blocked: dict[str, str]) -> Answer:
        if blocked:
            return Answer(
                503,
                {
                    "error": f"key '{clip(text)}' of store '{clip(store)}' cannot be answered now: "
                    + "; ".join(f"{t}: {r}" for t, r in sorted(blocked.items())),
                    "reason": _reason(blocked),
                    "blocked": blocked,
                    "container": self.container_id,
                },
            )
        return Answer(
            404,
            {"error": f"key '{clip(text)}' is not in store '{clip(store)}'", "container": self.container_id},
        )

    def range(self, store: str, params: dict[str, str]) -> Answer:
        """``/stores/<store>/range?from=&to=&limit=``: entries in key byte order, over every task."""
        codec = self._codec(store)
        fmt = check_format(params.get("format"))
        from_key = key_bytes(codec, params["from"], fmt) if params.get("from") else None
        to_key = key_bytes(codec, params["to"], fmt) if params.get("to") else None
        limit = int_param(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        allow_stale = flag_param(params, "allow_stale")
        blocked: dict[str, str] = {}
        found: list[tuple[bytes, dict[str, Any]]] = []
        truncated = False
        shared = store in self._global
        mine = self.placement.mine()
        for partition in mine[:1] if shared else mine:
            with self._lock:
                reader, stale = self._reader(store, partition, allow_stale, blocked)
                if reader is None:
                    continue
                try:
                    entries = reader.range(from_key, to_key, limit)
                finally:
                    if stale:
                        reader.close()
            truncated |= len(entries) >= limit
            where = self._where(partition, reader, stale)
            for key, value in entries:
                entry = {
                    "key": render(key, codec.key_serde, fmt),
                    "key_hex": key.hex(),
                    "value": render(value, codec.msg_serde, fmt),
                }
                found.append((key, {**entry, "task": where["task"], "stale": stale}))
        if params.get("scope") != "local" and not shared:
            for owner in self.placement.others():
                remote = self.peers.ask(owner, f"/stores/{_q(store)}/range", params, blocked)
                if remote is not None:
                    truncated |= bool(remote.body.get("truncated"))
                    found += [(bytes.fromhex(e["key_hex"]), e) for e in remote.body["entries"]]
        if blocked:
            return self._missing(store, f"range {params.get('from', '')}..{params.get('to', '')}", blocked)
        found.sort(key=lambda item: item[0])
        return Answer(
            200,
            {
                "store": store,
                "entries": [entry for _, entry in found[:limit]],
                "truncated": truncated or len(found) > limit,
                "stale": any(entry["stale"] for _, entry in found[:limit]),
                "consistency": COMMITTED_OR_NEWER,
                "container": self.container_id,
            },
        )

    def partitions(self, store: str) -> Answer:
        """Answer ``/stores/<store>/partitions``: this container's tasks and the others' URLs.

        Each task's status, committed changelog offsets and lags.
        """
        self._codec(store)
        statuses = self.status.snapshot()["tasks"]
        committed = self._committed()
        metrics = self.registry.snapshot() if self.registry is not None else {}
        config = self.job.stores[store]
        tasks = []
        for partition in self.placement.mine():
            name = task_name_for(partition)
            status = statuses.get(name, "unknown")
            checkpoint = committed.get(name)
            offset = checkpoint.changelog_offsets.get(store) if checkpoint is not None else None
            tasks.append(
                {
                    "task": name,
                    "partition": partition,
                    "status": status,
                    "changelog": str(config.changelog) if config.changelog else None,
                    "committed_changelog_offset": offset,
                    # the owner writes its changelog itself: once running it is never behind it
                    "changelog_lag": 0 if status == RUNNING else None,
                    "input_lag": {
                        group.removeprefix("input."): values.get("lag")
                        for group, values in metrics.items()
                        if group.startswith("input.") and group.rsplit(".", 1)[-1] == str(partition)
                    },
                }
            )
        body: dict[str, Any] = {"store": store, "container": self.container_id, "tasks": tasks}
        if self.directory is not None:
            body["containers"] = {str(c): url for c, url in sorted(self.directory.known().items())}
        return Answer(200, body)

    # ----------------------------------------------------------------- reading
    def _reader(
        self, store: str, partition: int, allow_stale: bool, blocked: dict[str, str]
    ) -> tuple[StoreReader | None, bool]:
        """The reader of ``store`` for a task of this container, or ``None`` with the reason in ``blocked``.

        Called with the lock held.
        """
        name = task_name_for(partition)
        status = self.status.snapshot()["tasks"].get(name)
        if self._closed:
            blocked[name] = "the container is stopping"
            return None, False
        if status == RUNNING:
            task = next((t for t in list(self._tasks()) if t.partition == partition), None)
            if task is None:
                blocked[name] = "no longer run by this container (fenced by a newer one)"
                return None, False
            engine = task.stores.get(store)
            if not isinstance(engine, StorageEngine):
                blocked[name] = f"store '{store}' of this task has no engine queries can read"
                return None, False
            return LiveReader(engine.read_view()), False
        if status == RESTORING:
            if not allow_stale:
                blocked[name] = (
                    "restoring: its stores are being rebuilt from the changelog; ask again when it "
                    "runs, or add allow_stale=true to read the last local checkpoint"
                )
                return None, False
            reader = self.stale.reader(store, partition) if self.stale is not None else None
            if reader is None:
                blocked[name] = "restoring, and no stale copy of the store is on disk to read"
                return None, False
            return reader, True
        blocked[name] = f"the container is {status or 'not running it'}"
        return None, False


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _reason(blocked: dict[str, str]) -> str:
    reasons = list(blocked.values())
    return "restoring" if all(r.startswith("restoring") for r in reasons) else "unavailable"

"""``StateClient``: read a running job's stores from Python.

>>> client = StateClient("http://127.0.0.1:9405")
>>> client.base_urls()
['http://127.0.0.1:9405']

With Kafka bootstrap servers instead of a URL, the client finds the job's containers in the
job's announcement topic (``job`` names it) and asks the first one that answers; any
container answers for any key (docs/queries.md).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from samzapy.errors import SamzapyError
from samzapy.query.directory import Directory, directory_topic

DEFAULT_TIMEOUT_S = 10.0


class StateQueryError(SamzapyError):
    """A query failed.

    ``status`` is the HTTP status (503 while restoring), ``body`` the JSON answer (``error``,
    ``reason``, ``blocked``).
    """

    def __init__(self, message: str, status: int, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class StateClient:
    """A client of the interactive queries of one job.

    Args:
        target: ``http://host:port`` of any container, or Kafka bootstrap servers.
        job: with bootstrap servers, the job's name (``job.name``).
        job_id: with bootstrap servers, the job's ``job.id``.
        timeout_s: per request.
    """

    def __init__(
        self, target: str, *, job: str | None = None, job_id: str = "1", timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.timeout_s = timeout_s
        self._url: str | None = None
        self._directory: Directory | None = None
        if target.startswith(("http://", "https://")):
            self._url = target.rstrip("/")
        elif job is None:
            msg = f"StateClient('{target}'): with bootstrap servers, give job= (the job's job.name)"
            raise SamzapyError(msg)
        else:
            self._directory = Directory(target, directory_topic(job, job_id))

    def base_urls(self) -> list[str]:
        """The container URLs this client may ask, in order."""
        if self._url is not None:
            return [self._url]
        assert self._directory is not None
        urls = [url for _, url in sorted(self._directory.known().items())]
        if not urls:
            msg = (
                f"no container has announced a query address in {self._directory.topic}: "
                "is the job running, with job.query.port set?"
            )
            raise SamzapyError(msg)
        return urls

    def get(self, store: str, key: Any, *, fmt: str | None = None, allow_stale: bool = False) -> Any:
        """The value of ``key`` in ``store``, or ``None`` when absent.

        ``key`` is a string (the store key serde's text form), an int, or with
        ``fmt="json"`` any JSON value (``["user-1", 1700000000000]``); ``bytes`` are sent as hex.

        Raises:
            StateQueryError: the job cannot answer (503 while the owner restores, 400 for a
                key that does not fit the store's serde, 404 for an unknown store).
        """
        return self.lookup(store, key, fmt=fmt, allow_stale=allow_stale).get("value")

    def lookup(
        self, store: str, key: Any, *, fmt: str | None = None, allow_stale: bool = False
    ) -> dict[str, Any]:
        """The whole answer for ``key`` (``value``, ``task``, ``container``, ``stale``, ...).

        ``{}`` when absent.
        """
        text, fmt = _key_text(key, fmt)
        params = {"format": fmt, "allow_stale": str(allow_stale).lower()}
        status, body = self._ask(f"/stores/{_q(store)}/keys/{_q(text)}", params)
        if status == 404 and "is not in store" in body.get("error", ""):
            return {}
        return _checked(status, body)

    def range(
        self,
        store: str,
        from_key: Any = None,
        to_key: Any = None,
        *,
        limit: int = 100,
        fmt: str | None = None,
        allow_stale: bool = False,
    ) -> list[tuple[Any, Any]]:
        """The ``(key, value)`` pairs of a key range, in serialised-key order.

        The pairs with ``from_key <= key < to_key``, at most ``limit`` (``None`` bounds: open).
        """
        params: dict[str, str] = {"limit": str(limit), "allow_stale": str(allow_stale).lower()}
        for name, key in (("from", from_key), ("to", to_key)):
            if key is not None:
                params[name], fmt = _key_text(key, fmt)
        params["format"] = fmt or "string"
        body = _checked(*self._ask(f"/stores/{_q(store)}/range", params))
        return [(e["key"], e["value"]) for e in body["entries"]]

    def partitions(self, store: str) -> dict[str, Any]:
        """The ``/stores/<store>/partitions`` answer of the container asked."""
        return _checked(*self._ask(f"/stores/{_q(store)}/partitions", {}))

    def _ask(self, path: str, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        query = urllib.parse.urlencode(params)
        failures = []
        for base in self.base_urls():
            url = f"{base}{path}?{query}" if query else f"{base}{path}"
            try:
                with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as error:
                return error.code, _json(error.read())
            except OSError as exc:
                failures.append(f"{base}: {exc}")
        msg = "no container answered: " + "; ".join(failures)
        raise SamzapyError(msg)


def _key_text(key: Any, fmt: str | None) -> tuple[str, str]:
    if isinstance(key, bytes):
        return key.hex(), "hex"
    if fmt == "json" or (fmt is None and not isinstance(key, str | int)):
        return json.dumps(key), "json"
    return str(key), fmt or "string"


def _json(data: bytes) -> dict[str, Any]:
    try:
        answer: dict[str, Any] = json.loads(data)
    except ValueError:
        return {"error": data.decode(errors="replace")}
    return answer


def _checked(status: int, body: dict[str, Any]) -> dict[str, Any]:
    if status != 200:
        msg = f"query failed ({status}): {body.get('error')}"
        raise StateQueryError(msg, status, body)
    return body


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")

"""Asking the job's other containers.

Their URL from the :class:`Directory`, then a plain HTTP GET with ``scope=local`` (the other
container answers from its own tasks only, so a request is forwarded at most once).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request

from samzapy.query.answer import Answer
from samzapy.query.directory import Directory

log = logging.getLogger(__name__)

#: Seconds to wait for another container's answer.
PROXY_TIMEOUT_S = 5.0


class Peers:
    """The other containers of a job, as seen from container ``container_id``.

    ``directory`` is ``None`` for a job of one container (no one to ask).
    """

    def __init__(self, container_id: int, directory: Directory | None) -> None:
        self.container_id = container_id
        self.directory = directory

    def ask(
        self, container: int | str, path: str, params: dict[str, str], blocked: dict[str, str]
    ) -> Answer | None:
        """Ask ``container`` (scope=local).

        A container id, looked up in the directory, or the URL of a group member; a 200 answer,
        or ``None`` with reasons in ``blocked``.
        """
        query = urllib.parse.urlencode({**params, "scope": "local"})
        if isinstance(container, str):
            return self._answer(_fetch(f"{container}{path}?{query}"), f"member at {container}", blocked)
        where = f"container {container}"
        if self.directory is None:
            blocked[where] = "no directory of containers"
            return None
        answer, tried = None, None
        for refresh in (False, True):  # a failure reads the directory again: it may have moved
            url = self.directory.url(container, refresh=refresh)
            if url is None:
                blocked[where] = f"has not announced a query address in {self.directory.topic}"
                continue
            if url == tried:
                break
            tried = url
            answer = _fetch(f"{url}{path}?{query}")
            if answer is not None:
                break
            blocked[where] = f"not reachable at {url}"
        return self._answer(answer, where, blocked)

    def _answer(self, answer: Answer | None, where: str, blocked: dict[str, str]) -> Answer | None:
        """``answer`` when it is a 200; else ``None``, with why in ``blocked``."""
        if answer is None:
            blocked.setdefault(where, "not reachable")
            return None
        blocked.pop(where, None)
        if answer.status == 200:
            answer.body["via"] = self.container_id
            return answer
        if answer.status == 503:
            blocked.update(answer.body.get("blocked") or {where: answer.body.get("error", "unavailable")})
        elif answer.status != 404:
            blocked[where] = f"answered {answer.status}: {answer.body.get('error')}"
        return None


def _fetch(url: str) -> Answer | None:
    try:
        with urllib.request.urlopen(url, timeout=PROXY_TIMEOUT_S) as response:
            return Answer(response.status, json.loads(response.read()))
    except urllib.error.HTTPError as error:
        try:
            return Answer(error.code, json.loads(error.read()))
        except ValueError:
            return Answer(error.code, {"error": error.reason})
    except (OSError, ValueError) as exc:
        log.info("query: %s did not answer: %s", url, exc)
        return None

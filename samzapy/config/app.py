"""What a task sees of the job's configuration: its application keys, read-only.

:class:`AppConfig` is handed to tasks as ``context.config``. It holds the keys outside
samzapy's reserved prefixes (``job.``, ``task.``, ``stores.``, ...), remembers where each was
set, and reads them with typed getters whose errors name the key, the value and its
``path:line``. samzapy's own keys reach the runtime only through the validated
:class:`~samzapy.config.JobConfig`; what a task needs of them is on the context
(``context.inputs``, ``context.get_store``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from samzapy.config.properties import DICT_SOURCE, Property, TypedGetters

#: Key prefixes owned by samzapy: an unknown key under them is an error; every other key is
#: an application key.
RESERVED_PREFIXES = ("job.", "task.", "stores.", "systems.", "serializers.", "metrics.", "blob.store.")


def is_reserved(key: str) -> bool:
    """Whether ``key`` lies in a namespace owned by samzapy (else it is an application key).

    >>> is_reserved("stores.s.factory"), is_reserved("app.threshold")
    (True, False)
    """
    return key.startswith(RESERVED_PREFIXES)


class AppConfig(TypedGetters, Mapping[str, str]):
    r"""The application keys of a job: an immutable ``Mapping[str, str]`` with typed getters.

    Example:
        >>> from samzapy.config.properties import parse_properties
        >>> properties = parse_properties("app.threshold=10\napp.mode=fast\n", "job.properties")
        >>> app = AppConfig(properties, "job.properties")
        >>> app.get_int("app.threshold", 5), app.get_str("app.mode"), app.get_bool("app.on", True)
        (10, 'fast', True)
        >>> app.location("app.mode")
        'job.properties:2'
        >>> app.get_int("app.mode")
        Traceback (most recent call last):
        ...
        samzapy.errors.ConfigError: 1 problem in job.properties:
          - Invalid value 'fast' for 'app.mode' (job.properties:2): must be an integer
    """

    __slots__ = ("_entries", "_source")

    def __init__(self, properties: Iterable[Property] = (), source: str = DICT_SOURCE) -> None:
        """Hold ``properties`` (a later one wins); ``source`` names the file in messages.

        The caller chooses the keys: :func:`application_view` passes the non-reserved ones.
        """
        self._entries = {prop.key: prop for prop in properties}
        self._source = source

    @property
    def source(self) -> str:
        """The file the job's configuration was loaded from."""
        return self._source

    def entry_or_none(self, key: str) -> Property | None:
        """The :class:`Property` of ``key``, ``None`` when it is not set."""
        return self._entries.get(key)

    def location(self, key: str) -> str:
        """Where ``key`` was set: ``path:line``, ``--config`` or ``<dict>``; the source when unset."""
        prop = self._entries.get(key)
        return prop.location if prop is not None else self._source

    def subset(self, prefix: str) -> dict[str, str]:
        """The keys starting with ``prefix``, prefix stripped.

        >>> from samzapy.config.properties import Property
        >>> AppConfig([Property("app.a.x", "1", "f", 1), Property("b", "2", "f", 2)]).subset("app.a.")
        {'x': '1'}
        """
        return {k[len(prefix) :]: p.value for k, p in self._entries.items() if k.startswith(prefix)}

    def __getitem__(self, key: str) -> str:
        return self._entries[key].value

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"AppConfig({len(self)} keys from {self._source})"

    def __reduce__(self) -> tuple[type[AppConfig], tuple[list[Property], str]]:
        # slots and no __dict__: say how to rebuild it (a JobConfig may go to Spark executors)
        return (AppConfig, (list(self._entries.values()), self._source))


def application_view(properties: Iterable[Property], source: str) -> AppConfig:
    """The :class:`AppConfig` of ``properties``: the keys outside samzapy's reserved prefixes.

    >>> from samzapy.config.properties import Property
    >>> props = [Property("app.x", "1", "f", 1), Property("task.commit.ms", "5", "f", 2)]
    >>> sorted(application_view(props, "f"))
    ['app.x']
    """
    return AppConfig((p for p in properties if not is_reserved(p.key)), source)

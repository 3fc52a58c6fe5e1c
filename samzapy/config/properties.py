r"""Java ``.properties`` files, read by hand so that every key keeps its file and line.

The syntax is ``java.util.Properties.load``'s: ``#``/``!`` comment lines, ``key=value``,
``key: value`` and ``key value``, ``\`` line continuations, and the escapes ``\t \n \r \f``,
``\uXXXX`` and ``\<char>`` (``\=``, ``\:``, ``\ ``, ``\#``, ...). Files are read as UTF-8.

:class:`Config` is the raw result: an immutable ``Mapping[str, str]`` that remembers where
each key came from, with typed getters for application keys. The validated job view is
built from it by :func:`samzapy.config.job.parse_job_config`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from samzapy.errors import ConfigError

log = logging.getLogger(__name__)

_WHITESPACE = " \t\f"
_NEWLINES = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
#: Where override values come from (``samzapy run --config key=value``).
OVERRIDE_SOURCE = "--config"
#: Where values of :meth:`Config.from_dict` come from.
DICT_SOURCE = "<dict>"

T = TypeVar("T")
V = TypeVar("V")


@dataclass(frozen=True)
class Property:
    """One ``key=value`` of a properties file, with where it was written.

    ``line`` is the line the (possibly continued) entry starts on; 0 when the value did not
    come from a file (overrides, dictionaries).
    """

    key: str
    value: str
    source: str
    line: int

    @property
    def location(self) -> str:
        """``path:line``, or just the source when there is no line.

        >>> Property("a", "1", "job.properties", 3).location
        'job.properties:3'
        >>> Property("a", "1", "--config", 0).location
        '--config'
        """
        return f"{self.source}:{self.line}" if self.line else self.source


def config_error(source: str, problems: Sequence[str]) -> ConfigError:
    r"""One :class:`ConfigError` listing ``problems``; they are kept in its ``problems`` attribute.

    >>> str(config_error("job.properties", ["a", "b"]))
    '2 problems in job.properties:\n  - a\n  - b'
    """
    heading = f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {source}:"
    error = ConfigError("\n".join([heading, *(f"  - {p}" for p in problems)]))
    error.problems = list(problems)  # type: ignore[attr-defined]
    return error


def _unescape(text: str, source: str, line: int) -> str:
    r"""Resolve the backslash escapes of a key or value.

    >>> _unescape(r"a\=b\:c\ d\te\\f\u00e9\#", "x", 1)
    'a=b:c d\te\\fé#'
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 >= len(text):
            out.append("" if char == "\\" else char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                msg = f"Malformed \\uXXXX escape '\\u{digits}' ({source}:{line}): needs 4 hex digits"
                raise config_error(source, [msg])
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _continues(line: str) -> bool:
    """Whether ``line`` ends with an odd number of backslashes (a continuation)."""
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_entry(logical: str) -> tuple[str, str]:
    r"""Split a logical line into raw (still escaped) key and value.

    >>> _split_entry("a = b")
    ('a', 'b')
    >>> _split_entry(r"a\ b:c")
    ('a\\ b', 'c')
    >>> _split_entry("key   value  ")
    ('key', 'value  ')
    """
    i = 0
    while i < len(logical) and logical[i] not in "=:" + _WHITESPACE:
        i += 2 if logical[i] == "\\" else 1
    key, rest = logical[:i], logical[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first line number, logical line) with comments, blanks and continuations handled."""
    lines = _NEWLINES.split(text)
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(_WHITESPACE)
            i += 1
        yield number, line


def parse_properties(text: str, source: str) -> list[Property]:
    r"""Parse the text of a ``.properties`` file; a key given twice keeps its last value.

    A duplicate key is logged as a warning naming both places.

    >>> text = "# comment\n  ! another\na=1\nb: two\nc three \\\n    four\nd\\ e=\\u00e9\n"
    >>> [(p.key, p.value, p.line) for p in parse_properties(text, "job.properties")]
    [('a', '1', 3), ('b', 'two', 4), ('c', 'three four', 5), ('d e', 'é', 7)]
    >>> [(p.key, p.value, p.line) for p in parse_properties("a=1\na=2", "x")]
    [('a', '2', 2)]
    """
    entries: dict[str, Property] = {}
    unseparated = []
    for number, logical in _logical_lines(text):
        raw_key, raw_value = _split_entry(logical)
        if raw_key == logical.rstrip(_WHITESPACE):
            # Java reads a lone word as a key with an empty value; here it is always a slip
            # (a lost '=', a value glued to its key): say so rather than keep an empty key.
            unseparated.append(
                f"'{_short(logical)}' ({source}:{number}) has no separator: write key=value "
                f"(a key with an empty value: key=)"
            )
            continue
        prop = Property(
            _unescape(raw_key, source, number), _unescape(raw_value, source, number), source, number
        )
        previous = entries.pop(prop.key, None)
        if previous is not None:
            log.warning(
                "Duplicate key %r: %s overrides %s (the last value wins)",
                prop.key,
                prop.location,
                previous.location,
            )
        entries[prop.key] = prop
    if unseparated:
        raise config_error(source, unseparated)
    return list(entries.values())


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _path_of(path: str | Path) -> Path:
    """A filesystem path from a plain path or a ``file://`` URI.

    >>> str(_path_of("file:///etc/job%20a.properties"))
    '/etc/job a.properties'
    >>> str(_path_of("config/job.properties"))
    'config/job.properties'
    """
    text = str(path)
    if text.startswith("file:"):
        return Path(unquote(urlparse(text).path))
    return Path(text)


def read_properties(path: str | Path) -> list[Property]:
    """Read a ``.properties`` file (a path or a ``file:///abs/path`` URI) as UTF-8.

    Raises:
        ConfigError: when the file cannot be read or holds a malformed escape.
    """
    file = _path_of(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"Config file '{file}' does not exist (working directory: {Path.cwd()})"
        raise config_error(str(file), [msg]) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"Config file '{file}' cannot be read: {exc}"
        raise config_error(str(file), [msg]) from exc
    return parse_properties(text, str(file))


_REQUIRED: Any = object()


class TypedGetters:
    """Typed reads of string values that remember where they were set.

    A subclass provides :meth:`entry_or_none` and :attr:`source`; a bad value is reported as
    a :class:`ConfigError` naming the key, the value, its ``path:line`` and what was expected.
    """

    __slots__ = ()

    @property
    def source(self) -> str:
        """The file the values were loaded from, for messages."""
        raise NotImplementedError

    def entry_or_none(self, key: str) -> Property | None:
        """The :class:`Property` of ``key``, ``None`` when it is not set."""
        raise NotImplementedError

    def _typed(self, key: str, default: T, parse: Callable[[str], V], expected: str) -> V | T:
        prop = self.entry_or_none(key)
        if prop is None:
            if default is _REQUIRED:
                msg = f"'{key}' is required ({self.source}): must be {expected}"
                raise config_error(self.source, [msg])
            return default
        try:
            return parse(prop.value)
        except ValueError:
            msg = f"Invalid value '{prop.value}' for '{key}' ({prop.location}): must be {expected}"
            raise config_error(self.source, [msg]) from None

    def get_str(self, key: str, default: T = _REQUIRED) -> str | T:
        """The value of ``key``; ``default`` when unset (required when no default is given)."""
        return self._typed(key, default, str, "a string")

    def get_int(self, key: str, default: T = _REQUIRED) -> int | T:
        """The value of ``key`` as an integer; ``default`` when unset (required without one)."""
        return self._typed(key, default, parse_int, "an integer")

    def get_float(self, key: str, default: T = _REQUIRED) -> float | T:
        """The value of ``key`` as a number; ``default`` when unset (required without one)."""
        return self._typed(key, default, parse_float, "a number")

    def get_bool(self, key: str, default: T = _REQUIRED) -> bool | T:
        """The value of ``key`` as ``true``/``false`` (any case); ``default`` when unset."""
        return self._typed(key, default, parse_bool, "true or false")

    def get_list(self, key: str, default: T = _REQUIRED) -> list[str] | T:
        """The value of ``key`` as a comma-separated list (items stripped, empty items dropped)."""
        return self._typed(key, default, parse_list, "a comma-separated list")


class Config(TypedGetters, Mapping[str, str]):
    """A job's raw configuration: an immutable ``Mapping[str, str]`` that knows where keys came from.

    It is what :func:`load_config` reads and :func:`samzapy.config.parse_job_config` checks;
    the runtime works from the resulting :class:`~samzapy.config.JobConfig`, and tasks see
    their application keys through its :class:`~samzapy.config.AppConfig`. The typed getters
    name the key, its value, its place and what was expected when a value is bad.

    Example:
        >>> config = Config.from_dict({"app.threshold": "10", "app.enabled": "true"})
        >>> config.get_int("app.threshold", 5), config.get_bool("app.enabled", False)
        (10, True)
        >>> config.get_int("app.missing", 5)
        5
        >>> config.location("app.threshold")
        '<dict>'
        >>> config.with_overrides({"app.threshold": "20"}).location("app.threshold")
        '--config'
    """

    __slots__ = ("_entries", "_source", "_base_dir")

    def __init__(
        self, properties: Iterable[Property] = (), *, source: str = DICT_SOURCE, base_dir: Path | None = None
    ) -> None:
        """Build from ``properties`` (a later one wins); ``base_dir`` anchors relative schema paths.

        Args:
            properties: the entries, in order.
            source: the file the configuration was loaded from, for messages.
            base_dir: the directory of that file; ``None`` means the working directory.
        """
        entries: dict[str, Property] = {}
        for prop in properties:
            entries[prop.key] = prop
        self._entries = entries
        self._source = source
        self._base_dir = base_dir

    @property
    def source(self) -> str:
        """The file the configuration was loaded from (``<dict>`` for :meth:`from_dict`)."""
        return self._source

    @property
    def base_dir(self) -> Path | None:
        """The directory of that file; relative schema paths start there (``None``: working dir)."""
        return self._base_dir

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any]) -> Config:
        """A configuration from a dictionary (values are turned into strings); for tests and tools."""
        return cls(Property(str(k), str(v), DICT_SOURCE, 0) for k, v in mapping.items())

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        """A copy with ``overrides`` applied; their location is ``--config``."""
        extra = (Property(str(k), str(v), OVERRIDE_SOURCE, 0) for k, v in overrides.items())
        return Config([*self._entries.values(), *extra], source=self.source, base_dir=self.base_dir)

    def __getitem__(self, key: str) -> str:
        return self._entries[key].value

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Config({len(self)} keys from {self.source})"

    def entry(self, key: str) -> Property:
        """The :class:`Property` of ``key`` (raises ``KeyError`` when absent)."""
        return self._entries[key]

    def entry_or_none(self, key: str) -> Property | None:
        """The :class:`Property` of ``key``, ``None`` when it is not set."""
        return self._entries.get(key)

    def entries(self) -> Iterator[Property]:
        """Every entry, in the order of the file (overrides last)."""
        return iter(self._entries.values())

    def location(self, key: str) -> str:
        """Where ``key`` was set: ``path:line``, ``--config`` or ``<dict>``; the source when unset."""
        prop = self._entries.get(key)
        return prop.location if prop is not None else self.source

    def line(self, key: str | None) -> int:
        """The line ``key`` was set on; 0 when unset or not from a file (to sort problems)."""
        prop = self._entries.get(key) if key is not None else None
        return prop.line if prop is not None else 0

    def resolve_path(self, value: str) -> Path:
        """``value`` as a path, relative ones taken from the config file's directory."""
        path = Path(value).expanduser()
        if path.is_absolute():
            return path
        return (self.base_dir if self.base_dir is not None else Path.cwd()) / path

    def subset(self, prefix: str) -> dict[str, str]:
        """The keys starting with ``prefix``, prefix stripped.

        >>> Config.from_dict({"app.a": 1, "app.b.c": 2, "other": 3}).subset("app.")
        {'a': '1', 'b.c': '2'}
        """
        return {k[len(prefix) :]: p.value for k, p in self._entries.items() if k.startswith(prefix)}


def parse_int(text: str) -> int:
    """An integer written in decimal, surrounding whitespace allowed.

    >>> parse_int(" -12 ")
    -12
    >>> parse_int("1_000")
    Traceback (most recent call last):
    ...
    ValueError: not an integer: '1_000'
    """
    if not re.fullmatch(r"[+-]?\d+", text.strip()):
        msg = f"not an integer: {text!r}"
        raise ValueError(msg)
    return int(text)


def parse_float(text: str) -> float:
    """A number, surrounding whitespace allowed.

    >>> parse_float(" 2.5 ")
    2.5
    """
    return float(text.strip())


def parse_bool(text: str) -> bool:
    """``true`` or ``false``, in any case (Samza's booleans).

    >>> parse_bool("TRUE"), parse_bool(" false")
    (True, False)
    """
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        msg = f"not a boolean: {text!r}"
        raise ValueError(msg)
    return lowered == "true"


def parse_list(text: str) -> list[str]:
    """A comma-separated list, items stripped, empty items dropped.

    >>> parse_list(" a, b,,c ")
    ['a', 'b', 'c']
    """
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings (``samzapy run --config``) as a dictionary.

    >>> parse_overrides(["a=1", "b = x=y"])
    {'a': '1', 'b': 'x=y'}
    """
    result: dict[str, str] = {}
    problems = []
    for item in overrides:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            problems.append(f"Invalid override '{item}' (--config): must be key=value (task.commit.ms=5000)")
            continue
        result[key.strip()] = value.strip()
    if problems:
        raise config_error(OVERRIDE_SOURCE, problems)
    return result


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> Config:
    """Read a job's ``.properties`` file and apply ``key=value`` overrides.

    Raises:
        ConfigError: when the file cannot be read or an override is malformed.
    """
    parsed_overrides = parse_overrides(overrides)
    file = _path_of(path)
    config = Config(read_properties(file), source=str(file), base_dir=file.absolute().parent)
    return config.with_overrides(parsed_overrides) if parsed_overrides else config

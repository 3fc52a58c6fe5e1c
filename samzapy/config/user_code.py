"""Importing the user code a job names: ``task.class`` and side-input processors.

Both are ``module:Name`` (``Name`` may be dotted: ``module:Outer.Inner``) or
``package.module.Name``. Like Flask's and bytewax's app locators, an error tells apart "the
module does not exist", "the module exists but raised while importing" and "the module has
no such attribute" (with the closest name), and names the key, the value and where it was set.
A module that is not importable as it is is looked for, as ``python -m`` would find it, next
to the properties file and then in the working directory; the directory it is found in is put
on ``sys.path`` (first), so its sibling modules import too.
:func:`samzapy.config.parse_job_config` calls these once per run (``check_task_class=True``)
and keeps what they return on the :class:`~samzapy.config.JobConfig`.
"""

from __future__ import annotations

import difflib
import importlib
import sys
import traceback
from pathlib import Path
from types import ModuleType

from samzapy.config.model import Processor
from samzapy.config.properties import config_error
from samzapy.errors import ConfigError
from samzapy.task import StreamTask


def _split(spec: str) -> tuple[str, str]:
    """Module and attribute path of a spec.

    >>> _split("myjobs.counter:PageViewCounter")
    ('myjobs.counter', 'PageViewCounter')
    >>> _split("myjobs.counter.PageViewCounter")
    ('myjobs.counter', 'PageViewCounter')
    """
    module, colon, attr = spec.strip().partition(":")
    if not colon:
        module, _, attr = spec.strip().rpartition(".")
    return module, attr


def _fail(location: str, message: str) -> ConfigError:
    return config_error(location.rpartition(":")[0] or location, [message])


def import_object(spec: str, key: str, location: str, kind: str = "Name") -> object:
    """The object ``spec`` names, imported.

    Args:
        spec: ``module:Name`` or ``package.module.Name``.
        key: the key that names it, for messages.
        location: where that key was set (``path:line``), for messages.
        kind: what ``Name`` is, in the message about a malformed spec (``Class``).

    Raises:
        ConfigError: the spec is malformed, the module is not found or raised while
            importing, or it has no such attribute.
    """
    where = f"'{key}' = '{spec}' ({location})"
    module_name, attr_path = _split(spec)
    if not module_name or not attr_path:
        raise _fail(location, f"{where}: must be module:{kind} or package.module.{kind}")
    module = _import(module_name, where, location)
    obj: object = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise _fail(location, _no_attribute(where, module_name, attr_path, obj, part))
        obj = getattr(obj, part)
    return obj


def resolve_task_class(spec: str, location: str) -> type[StreamTask]:
    """Import the class named by ``spec`` and check that it is a :class:`samzapy.StreamTask`.

    Args:
        spec: ``module:Class`` (``Class`` may be dotted: ``module:Outer.Inner``) or
            ``package.module.Class``.
        location: where ``task.class`` was set (``path:line``), for messages.

    Raises:
        ConfigError: the module is not found, raised while importing, has no such attribute,
            or the attribute is not a class deriving from ``samzapy.StreamTask``.
    """
    obj = import_object(spec, "task.class", location, "Class")
    where = f"'task.class' = '{spec}' ({location})"
    attr_path = _split(spec)[1]
    if not isinstance(obj, type):
        raise _fail(location, f"{where}: '{attr_path}' is a {type(obj).__name__}, not a class")
    if not issubclass(obj, StreamTask):
        raise _fail(location, f"{where}: class '{attr_path}' does not derive from samzapy.StreamTask")
    return obj


def _user_dirs(location: str) -> list[Path]:
    """Where a user's task module may sit: next to the properties file, then the working directory."""
    dirs = []
    config_file = Path(location.rpartition(":")[0] or location)
    if config_file.is_file():
        dirs.append(config_file.resolve().parent)
    if Path.cwd() not in dirs:
        dirs.append(Path.cwd())
    return dirs


def _put_on_path(module_name: str, location: str) -> bool:
    """Put the first user directory holding ``module_name``'s top package on ``sys.path``."""
    top = module_name.partition(".")[0]
    for folder in _user_dirs(location):
        if (folder / f"{top}.py").is_file() or (folder / top / "__init__.py").is_file():
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
            importlib.invalidate_caches()
            return True
    return False


def _import(module_name: str, where: str, location: str, retried: bool = False) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + "."))
        if not missing:
            raise _fail(location, _raised(where, module_name, exc)) from exc
        if not retried and _put_on_path(module_name, location):
            return _import(module_name, where, location, retried=True)
        looked = " nor in ".join(str(d) for d in _user_dirs(location))
        msg = (
            f"{where}: module '{module_name}' not found on sys.path nor in {looked}: put "
            f"{module_name.partition('.')[0]}.py next to the properties file, or install its package, "
            f"or add its directory to PYTHONPATH"
        )
        raise _fail(location, msg) from None
    except Exception as exc:  # noqa: BLE001 - user code may raise anything while importing
        raise _fail(location, _raised(where, module_name, exc)) from exc


def _no_attribute(where: str, module_name: str, attr_path: str, owner: object, part: str) -> str:
    """The "no attribute" message, with the closest name, else the task classes ``owner`` defines."""
    names = [n for n in dir(owner) if not n.startswith("_")]
    close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
    if close:
        hint = f"; did you mean '{close[0]}'?"
    else:
        tasks = [n for n in names if _is_task_class(getattr(owner, n, None))]
        hint = f"; its task classes: {', '.join(tasks)}" if tasks else ""
    return f"{where}: module '{module_name}' has no attribute '{attr_path}'{hint}"


def _is_task_class(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, StreamTask) and obj is not StreamTask


def resolve_serde_factory(spec: str, key: str, location: str) -> object:
    """The user's serde named by ``spec``.

    A class (or a function) that, called without arguments, makes an object with
    ``to_bytes(obj) -> bytes`` and ``from_bytes(data)`` (:class:`samzapy.serdes.Serde`); checked
    on the class, or on what the function returns.

    Raises:
        ConfigError: the module is missing or raised while importing, it has no such
            attribute, or the attribute does not make a serde.
    """
    obj = import_object(spec, key, location, "Class")
    where = f"'{key}' = '{spec}' ({location})"
    probe = obj if isinstance(obj, type) else None
    if probe is None and callable(obj):
        try:
            probe = obj()
        except Exception as exc:  # noqa: BLE001 - user code may raise anything
            raise _fail(location, f"{where}: calling it raised {type(exc).__name__}: {exc}") from exc
    missing = [m for m in ("to_bytes", "from_bytes") if not callable(getattr(probe, m, None))]
    if probe is None or missing:
        what = "it is not callable" if probe is None else f"it has no {' and no '.join(missing)}"
        msg = (
            f"{where}: not a serde: {what}. A serde is a class whose instances have "
            f"to_bytes(obj) -> bytes and from_bytes(data) -> object (docs/configuration.md, 'Your own serde')"
        )
        raise _fail(location, msg)
    return obj


def resolve_processor(spec: str, key: str, location: str) -> Processor:
    """The side-input processor named by ``spec``.

    A function, or a class (built without arguments) whose instances have
    ``process(envelope, store)``; then that bound method.

    Raises:
        ConfigError: the module is missing or raised while importing, it has no such
            attribute, or the attribute is neither a function nor a class with ``process``.
    """
    obj = import_object(spec, key, location, "Callable")
    where = f"'{key}' = '{spec}' ({location})"
    attr_path = _split(spec)[1]
    if isinstance(obj, type):
        if not callable(getattr(obj, "process", None)):
            raise _fail(location, f"{where}: class '{attr_path}' has no method process(envelope, store)")
        processor: Processor = obj().process
        return processor
    if not callable(obj):
        raise _fail(location, f"{where}: '{attr_path}' is a {type(obj).__name__}, not a function or a class")
    function: Processor = obj
    return function


def _raised(where: str, module_name: str, exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {frame.filename}:{frame.lineno}" if frame else ""
    return f"{where}: importing module '{module_name}' raised {type(exc).__name__}: {exc}{at}"

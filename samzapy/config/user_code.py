"""Importing the user code a job names: ``task.class`` and side-input processors.

Both are ``module:Name`` (``Name`` may be dotted: ``module:Outer.Inner``) or
``package.module.Name``. Like Flask's and bytewax's app locators, an error tells apart "the
module does not exist", "the module exists but raised while importing" and "the module has
no such attribute", and names the key, the value and where it was set.
:func:`samzapy.config.parse_job_config` calls these once per run (``check_task_class=True``)
and keeps what they return on the :class:`~samzapy.config.JobConfig`.
"""

from __future__ import annotations

import importlib
import traceback
from pathlib import Path

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
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            msg = (
                f"{where}: module '{module_name}' not found: install its package or put its directory "
                f"on PYTHONPATH (working directory: {Path.cwd()})"
            )
            raise _fail(location, msg) from None
        raise _fail(location, _raised(where, module_name, exc)) from exc
    except Exception as exc:  # noqa: BLE001 - user code may raise anything while importing
        raise _fail(location, _raised(where, module_name, exc)) from exc
    obj: object = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise _fail(location, f"{where}: module '{module_name}' has no attribute '{attr_path}'")
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


def resolve_processor(spec: str, key: str, location: str) -> Processor:
    """The side-input processor named by ``spec``: a function, or a class (built without
    arguments) whose instances have ``process(envelope, store)``; then that bound method.

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

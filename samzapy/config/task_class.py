"""Resolving ``task.class`` (``module:Class`` or ``package.module.Class``) to a task class.

Like Flask's and bytewax's app locators, the error tells apart "the module does not exist",
"the module exists but raised while importing" and "the module has no such attribute".
"""

from __future__ import annotations

import importlib
import traceback
from pathlib import Path

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
    where = f"'task.class' = '{spec}' ({location})"
    module_name, attr_path = _split(spec)
    if not module_name or not attr_path:
        raise _fail(location, f"{where}: must be module:Class or package.module.Class")
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
            msg = f"{where}: module '{module_name}' has no attribute '{attr_path}'"
            raise _fail(location, msg)
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise _fail(location, f"{where}: '{attr_path}' is a {type(obj).__name__}, not a class")
    if not issubclass(obj, StreamTask):
        msg = f"{where}: class '{attr_path}' does not derive from samzapy.StreamTask"
        raise _fail(location, msg)
    return obj


def _raised(where: str, module_name: str, exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {frame.filename}:{frame.lineno}" if frame else ""
    return f"{where}: importing module '{module_name}' raised {type(exc).__name__}: {exc}{at}"

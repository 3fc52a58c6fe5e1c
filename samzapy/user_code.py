"""Point errors at the user's own code: the frames of a traceback below samzapy's runtime.

When a task's ``process``, ``window`` or ``init`` raises, the person reading the error wants
their own line, not the container's. :func:`user_traceback` drops the leading frames that
belong to samzapy's runtime (the container that called the task) and formats the rest as
Python does; :func:`user_line` names the deepest frame of the user's own code (not the
standard library, not an installed package) as ``file.py:line in function``.
"""

from __future__ import annotations

import logging
import sysconfig
import traceback
from pathlib import Path

import samzapy
from samzapy.errors import TaskError

_log = logging.getLogger("samzapy.task")

#: The log record attribute that keeps a record off the console unless ``-v`` was given; the
#: same name as :data:`samzapy.cli.logs.VERBOSE_ONLY` (the runtime does not import the CLI).
VERBOSE_ONLY = "samzapy_verbose_only"

#: samzapy's runtime code: frames in these folders called the task (or the task called back).
_RUNTIME = tuple(
    str(Path(p).resolve()) + "/"
    for p in (Path(samzapy.__file__).parent, Path(samzapy.__file__).parent.parent / "stores")
)
#: The standard library and installed packages: not the user's own code.
_LIBRARIES = tuple(
    str(Path(sysconfig.get_paths()[name]).resolve()) + "/"
    for name in ("stdlib", "platstdlib", "purelib", "platlib")
)


def _is_runtime(filename: str) -> bool:
    path = str(Path(filename).resolve())
    return path.startswith(_RUNTIME) and "/samzapy/jobs/" not in path


def _in_libraries(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_LIBRARIES)


def _frames(exc: BaseException) -> list[traceback.FrameSummary]:
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    first_user = next((i for i, f in enumerate(frames) if not _is_runtime(f.filename)), len(frames))
    return frames[first_user:]


def user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` from the first frame outside samzapy's runtime.

    As Python prints it (``Traceback ...`` / ``File ...`` lines / ``Type: message``); the whole
    traceback when the error arose in samzapy itself.
    """
    frames = _frames(exc) or traceback.extract_tb(exc.__traceback__)
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip("\n")


def user_line(exc: BaseException) -> str:
    """``file.py:line in function`` of the deepest frame of the user's own code, or ``""``.

    >>> try:
    ...     {}["text"]
    ... except KeyError as e:
    ...     user_line(e).endswith(" in <module>")
    True
    """
    frames = _frames(exc)
    own = [f for f in frames if not _is_runtime(f.filename) and not _in_libraries(f.filename)]
    chosen = own or frames
    if not chosen:
        return ""
    frame = chosen[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def log_user_traceback(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """Log ``what`` and the user's traceback of ``exc`` at ERROR.

    On the console only with ``-v`` (the command line's one ``Error:`` line carries the cause
    and :func:`user_line`), always in ``--log-file``.
    """
    logger.error("%s:\n%s", what, user_traceback(exc), extra={VERBOSE_ONLY: True})


def failure_text(what: str, exc: BaseException) -> str:
    """``what`` followed by the exception and where the user's code raised it.

    >>> failure_text("window() raised", ValueError("bad"))
    'window() raised ValueError: bad'
    """
    cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    line = user_line(exc)
    return f"{what} {cause}" + (f" (at {line})" if line else "")


def user_failure(task_name: str, what: str, exc: BaseException) -> TaskError:
    """The :class:`TaskError` for user code that raised outside a message (``init()``, ``window()``).

    Names the task, the exception and the user's line; logs the user's traceback.
    """
    text = f"task {task_name}: {failure_text(what, exc)}"
    log_user_traceback(_log, text, exc)
    return TaskError(f"{text}. Fix the task (run with -v for the traceback)")
